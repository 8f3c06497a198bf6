"""NodeResourcesFit for the resources kube-scheduler leaves to us (batch, mid and extended)."""
