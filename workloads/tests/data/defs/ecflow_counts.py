"""Loads a .def file with ecFlow's own Python API and prints its node and attribute
counts as JSON, named as benchtop's defs::Counts names them.

usage: python3 ecflow_counts.py FILE.def
"""
import json
import sys

import ecflow

defs = ecflow.Defs(sys.argv[1])
problems = defs.check()
counts = dict.fromkeys(
    ["suites", "families", "tasks", "variables", "triggers", "completes", "lates",
     "events", "meters", "labels", "limits", "inlimits", "times", "repeats", "defstatus"],
    0,
)
for suite in defs.suites:
    counts["suites"] += 1
    for node in [suite] + list(suite.get_all_nodes())[1:]:
        if isinstance(node, ecflow.Family):
            counts["families"] += 1
        elif isinstance(node, ecflow.Task):
            counts["tasks"] += 1
        counts["variables"] += len(list(node.variables))
        counts["triggers"] += node.get_trigger() is not None
        counts["completes"] += node.get_complete() is not None
        counts["lates"] += node.get_late() is not None
        counts["events"] += len(list(node.events))
        counts["meters"] += len(list(node.meters))
        counts["labels"] += len(list(node.labels))
        counts["limits"] += len(list(node.limits))
        counts["inlimits"] += len(list(node.inlimits))
        counts["times"] += len(list(node.times))
        counts["repeats"] += not node.get_repeat().empty()
        counts["defstatus"] += node.get_defstatus() != ecflow.DState.queued
print(json.dumps({"counts": counts, "check": problems}))
