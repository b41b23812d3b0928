"""Many clusters, one Slack app: a gateway queues requests on Redis Streams, one agent group per cluster runs them."""
