"""The node agent (koordlet): metrics, NodeMetric reporting and QoS enforcement. Arrives with its issue."""
