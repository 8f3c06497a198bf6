"""kube-scheduler's framework: extension points, the Handle, the runtime, the binding cycle.

Follows the shape of k8s.io/kubernetes/pkg/scheduler/framework:

- :mod:`~app.framework.interfaces`: one small Protocol per extension point (PreFilter, Filter,
  PreScore, Score, Reserve, Permit, PreBind, Bind, PostBind, PostFilter, Preemption), which plugin
  classes list among their bases;
- :mod:`~app.framework.preemption`: kube-scheduler's generic preemption pieces (candidates, the choice
  of one node, the in-tree resource fit a narrowed victim list is checked against);
- :mod:`~app.framework.handle`: what plugins get (snapshot lister, API client, waiting pods, clock);
- :mod:`~app.framework.runtime`: the enabled plugins and one runner per extension point;
- :mod:`~app.framework.bindingcycle`: what ``/bind`` runs (re-check, assume, Reserve, Permit,
  PreBind, Bind, PostBind; Unreserve on failure); :mod:`~app.framework.waiting`: Permit's waiting pods;
- :mod:`~app.framework.status`, :mod:`~app.framework.cyclestate`, :mod:`~app.framework.config`,
  :mod:`~app.framework.registry`: statuses (Skip included), per-cycle state, the plugin config and
  the generic name -> factory map.

Unlike kube-scheduler, Filter and Score take a whole batch of nodes at once (numpy rows) so plugins
can vectorise over thousands of nodes. The in-tree plugins and their registry live in
:mod:`app.plugins`; the framework never names them.

Layer: below :mod:`app.plugins`; may import :mod:`app.cache`, :mod:`app.sources`,
:mod:`app.client` and :mod:`app.api`.
"""
