"""Running the bot: typed configuration, JSON logs, Prometheus metrics."""
