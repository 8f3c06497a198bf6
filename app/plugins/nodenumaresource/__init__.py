"""NodeNUMAResource: cpusets for LSE/LSR pods and NUMA-aware placement (upstream
``pkg/scheduler/plugins/nodenumaresource``)."""
