"""A small hypothetical spec (YAML text) shared by tests that need a spec with round numbers: the
workload tests use it as is, the energy tests add an energy section."""

TOY_SPEC = """
schema_version: 1
id: toy-energy
name: Toy accelerator with energy data
vendor: test
hypothetical: true
architecture: toy
sources: {a: {title: test assumption, tag: A}}
compute:
  sm_count: {value: 10, source: a}
  clock_boost: {value: 1 GHz, source: a}
  tensor: {bf16: {value: 100 TFLOP/s, source: a}}
  vector: {fp32: {value: 10 TFLOP/s, source: a}}
  special_function: {value: 1 TFLOP/s, source: a}
memory:
  shared: {scope: per_sm, capacity: {value: 100 KiB, source: a}, bandwidth: {value: 20 TB/s, source: a}}
  l2: {scope: device, capacity: {value: 10 MB, source: a}, bandwidth: {value: 5 TB/s, source: a}}
  dram: {scope: device, capacity: {value: 10 GB, source: a}, bandwidth: {value: 1 TB/s, source: a}}
launch: {kernel: {value: 5 us, source: a}, graph_node: {value: 1 us, source: a}}
power: {tdp: {value: 100 W, source: a}, idle: {value: 10 W, source: a}}
"""
