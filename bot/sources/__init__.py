"""The adapters that implement layers.sources: a live cluster, Prometheus, scenario files and bundles."""
