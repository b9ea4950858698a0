"""What shows a daemon at work: history reports and plots, the demo's live view, the loop's timings,
job colours and the web dashboard with its ``/metrics``."""
