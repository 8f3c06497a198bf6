from app.api.nodeaffinity import required_affinity_matches


def _spec(*terms, selector=None):
    spec = {
        "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
        }
    }
    if selector is not None:
        spec["nodeSelector"] = selector
    return spec


def test_terms_are_ored_and_expressions_anded():
    spec = _spec(
        {
            "matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["a"]},
                {"key": "gpu", "operator": "Exists"},
            ]
        },
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n9"]}]},
    )
    assert required_affinity_matches(spec, {"zone": "a", "gpu": "1"}, "n1")
    assert not required_affinity_matches(spec, {"zone": "a"}, "n1")
    assert required_affinity_matches(spec, {}, "n9")


def test_not_in_match_fields_gt_lt_selector_and_empty_terms():
    away = _spec({"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]})
    assert not required_affinity_matches(away, {}, "n1") and required_affinity_matches(away, {}, "n2")
    gt = _spec({"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["8"]}]})
    assert required_affinity_matches(gt, {"cores": "16"}, "n") and not required_affinity_matches(
        gt, {"cores": "x"}, "n"
    )
    assert not required_affinity_matches(_spec({}), {}, "n")  # a term with nothing matches nothing
    assert required_affinity_matches({}, {}, "n")
    assert not required_affinity_matches({"nodeSelector": {"a": "b"}}, {"a": "c"}, "n")
    assert not required_affinity_matches({"nodeSelector": "oops"}, {}, "n")
