"""GPU sharing (upstream pkg/scheduler/plugins/deviceshare)."""
