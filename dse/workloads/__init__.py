"""Workload lowering: a workload spec plus a scenario becomes an operator table."""
