import pytest

from bot.ops.config import ConfigError, load_config


def test_defaults_without_environment() -> None:
    cfg = load_config({})
    assert cfg.digest_hour == 9 and cfg.digest_minute == 0
    assert cfg.timezone == "UTC"
    assert cfg.cordon_max_fraction == 0.25
    assert cfg.slack_api_url == "https://slack.com/api/"


def test_full_environment_is_parsed() -> None:
    cfg = load_config(
        {
            "SLACK_BOT_TOKEN": "xoxb-1-2-abc",
            "SLACK_APP_TOKEN": "xapp-1-A-1-x",
            "SLACK_API_URL": "http://127.0.0.1:9999/api",
            "GPUBOT_OPERATORS": "U123ABC, W999",
            "GPUBOT_OPERATOR_GROUPS": "S0614TZR7",
            "GPUBOT_DIGEST_CHANNEL": "C0123456",
            "GPUBOT_DIGEST_TIME": "07:30",
            "GPUBOT_TIMEZONE": "Europe/Paris",
            "GPUBOT_CORDON_MAX_FRACTION": "0.5",
            "PROMETHEUS_URL": "http://prom:9090",
            "REDIS_URL": "redis://redis:6379/0",
        },
        need_slack=True,
    )
    assert cfg.operators == frozenset({"U123ABC", "W999"})
    assert cfg.operator_groups == frozenset({"S0614TZR7"})
    assert (cfg.digest_hour, cfg.digest_minute) == (7, 30)
    assert cfg.slack_api_url == "http://127.0.0.1:9999/api/"
    assert cfg.cordon_max_fraction == 0.5


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"GPUBOT_DIGEST_TIME": "25:00"}, "GPUBOT_DIGEST_TIME"),
        ({"GPUBOT_DIGEST_TIME": "9am"}, "GPUBOT_DIGEST_TIME"),
        ({"GPUBOT_TIMEZONE": "Mars/Olympus"}, "GPUBOT_TIMEZONE"),
        ({"GPUBOT_CORDON_MAX_FRACTION": "1.5"}, "GPUBOT_CORDON_MAX_FRACTION"),
        ({"GPUBOT_CORDON_MAX_FRACTION": "lots"}, "GPUBOT_CORDON_MAX_FRACTION"),
        ({"GPUBOT_OPERATORS": "alice"}, "GPUBOT_OPERATORS"),
        ({"GPUBOT_OPERATOR_GROUPS": "U123"}, "GPUBOT_OPERATOR_GROUPS"),
        ({"PROMETHEUS_URL": "prom:9090"}, "PROMETHEUS_URL"),
        ({"REDIS_URL": "http://redis"}, "REDIS_URL"),
        ({"SLACK_API_URL": "not a url"}, "SLACK_API_URL"),
        ({"GPUBOT_OPERATOR_NAMESPACE": "GPU_Operator"}, "GPUBOT_OPERATOR_NAMESPACE"),
        ({"GPUBOT_WORKERS": "0"}, "GPUBOT_WORKERS"),
    ],
)
def test_bad_setting_is_one_line_naming_it(env: dict[str, str], names: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(env)
    msg = str(err.value)
    assert names in msg
    assert "\n" not in msg


def test_token_values_never_appear_in_errors() -> None:
    secret = "totally-secret-value-123"
    with pytest.raises(ConfigError) as err:
        load_config({"SLACK_BOT_TOKEN": secret})
    assert secret not in str(err.value)
    assert "SLACK_BOT_TOKEN" in str(err.value)


def test_serve_needs_its_tokens() -> None:
    with pytest.raises(ConfigError, match="SLACK_BOT_TOKEN"):
        load_config({}, need_slack=True)
    with pytest.raises(ConfigError, match="SLACK_APP_TOKEN"):
        load_config({"SLACK_BOT_TOKEN": "xoxb-1"}, need_slack=True)
    with pytest.raises(ConfigError, match="SLACK_SIGNING_SECRET"):
        load_config({"SLACK_BOT_TOKEN": "xoxb-1"}, need_slack=True, http=True)


def test_repr_hides_secrets() -> None:
    cfg = load_config({"SLACK_BOT_TOKEN": "xoxb-very-secret", "REDIS_URL": "redis://:pw@r:6379"})
    assert "very-secret" not in repr(cfg)
    assert "pw@" not in repr(cfg)
