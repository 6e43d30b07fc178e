"""Many profiles to one aggregate on Dask distributed (spec/fleet.md).

Only this package imports dask; the ``bbmap[fleet]`` extra installs it."""
