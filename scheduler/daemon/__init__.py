"""The scheduler daemon around the sans-I/O core: its ZeroMQ loop, request handlers, socket and access,
Job Startup and the System Monitor, journal, retention and state directory (docs/daemon.md)."""
