"""Oracles the tests and benches hold bbmap's fast paths against: what real perf prints,
parsed (``perf_oracle``); annotate's JSON/CSV renderers before the columnar writer
(``render_oracle``); the built-in min-cost-flow solver before the faster one
(``ssp_oracle``); the construct parses of side records (``side_construct``) and of Go's
function table (``pclntab_ref``); the recovered CFG against the PGO map's successor lists
(``cfg_pgo_map``).  Not installed: ``pip install .`` ships only ``bbmap/``."""
