"""The Slack bot: the Bolt app, its transports, posting, the state store and the daily digest's schedule."""
