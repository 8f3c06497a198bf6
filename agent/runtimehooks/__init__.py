"""The agent's runtime hooks (upstream ``pkg/koordlet/runtimehooks``): the RuntimeHookService that koord
runtime-proxy calls before a sandbox or container is created, so policies hold from the first instruction.

- :mod:`agent.runtimehooks.protocol`: the pod of a hook request, as the agent's strategies see pods;
- :mod:`agent.runtimehooks.freshpods`: the node's pods read again at the hook (single-flight), so pods the
  kubelet admitted together are seen;
- :mod:`agent.runtimehooks.hooks`: the hooks (gpu, cpuset, batchresource, groupidentity, memory QoS) on the
  agent's existing strategies;
- :mod:`agent.runtimehooks.server`: the gRPC server on a unix socket and its registration file.

The agent's reconcile loop stays the safety net: whatever a hook missed (agent down, proxy absent) is written
within a round of the pod appearing in the agent's states.
"""
