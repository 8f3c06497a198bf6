"""`koord sim`: replay a cluster trace through the service's own extender verbs."""
