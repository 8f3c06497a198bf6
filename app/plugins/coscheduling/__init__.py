"""Coscheduling (upstream pkg/scheduler/plugins/coscheduling): gang scheduling through the extender's
binding cycle: gang cache, PreFilter checks, Permit wait of a whole gang group, PodGroup status, REST."""

from app.plugins.coscheduling.args import CoschedulingArgs, decode_args
from app.plugins.coscheduling.plugin import Coscheduling, new_coscheduling

__all__ = ["Coscheduling", "CoschedulingArgs", "decode_args", "new_coscheduling"]
