"""Loads a .def file with ecFlow's own Python API and saves it again as ecFlow writes it.

usage: python3 ecflow_resave.py IN.def OUT.def
"""
import sys

import ecflow

ecflow.Defs(sys.argv[1]).save_as_defs(sys.argv[2])
