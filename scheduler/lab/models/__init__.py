"""Performance models used by the daemon (placement) and the simulator."""
