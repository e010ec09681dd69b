"""Settings resolve as the hipobj command resolves them: arguments, then
AWS_* variables, then ~/.aws files; HIPOBJ_NIC."""

import pytest

import hipobj

VARS = [
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_PROFILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "HIPOBJ_NIC",
]


@pytest.fixture
def home(tmp_path, monkeypatch):
    for v in VARS:
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    aws = tmp_path / ".aws"
    aws.mkdir()
    (aws / "credentials").write_text(
        "[default]\naws_access_key_id = fileA\naws_secret_access_key = fileS\n"
        "[p]\naws_access_key_id = pA\naws_secret_access_key = pS\n"
    )
    (aws / "config").write_text(
        "[default]\nregion = eu-west-1\nendpoint_url = http://cfg:1\n"
        "[profile p]\nregion = ap-south-1\nendpoint_url = http://p:2\n  nested = x\n"
    )
    return monkeypatch


def test_files_alone(home):
    r = hipobj.resolve_settings()
    assert r == {"endpoint": "http://cfg:1", "region": "eu-west-1", "access_key": "fileA", "nic": "soft0"}


def test_the_environment_wins_over_the_default_profile(home):
    home.setenv("AWS_ACCESS_KEY_ID", "envA")
    home.setenv("AWS_SECRET_ACCESS_KEY", "envS")
    home.setenv("AWS_DEFAULT_REGION", "us-west-2")
    home.setenv("AWS_ENDPOINT_URL", "http://env:3")
    home.setenv("HIPOBJ_NIC", "soft:127.0.0.1")
    r = hipobj.resolve_settings()
    assert r == {"endpoint": "http://env:3", "region": "us-west-2", "access_key": "envA", "nic": "soft:127.0.0.1"}
    # An explicit profile wins over the environment's keys.
    r = hipobj.resolve_settings(profile="p")
    assert (r["access_key"], r["region"]) == ("pA", "us-west-2")
    # Arguments win over everything.
    r = hipobj.resolve_settings(endpoint="http://arg:4", access_key="a", secret_key="s", region="r", nic="mlx5_0")
    assert r == {"endpoint": "http://arg:4", "region": "r", "access_key": "a", "nic": "mlx5_0"}


def test_aws_profile_and_region_order(home):
    home.setenv("AWS_PROFILE", "p")
    r = hipobj.resolve_settings()
    assert (r["endpoint"], r["region"], r["access_key"]) == ("http://p:2", "ap-south-1", "pA")
    home.setenv("AWS_REGION", "a")
    home.setenv("AWS_DEFAULT_REGION", "b")
    assert hipobj.resolve_settings()["region"] == "a"


def test_missing_pieces(home, tmp_path):
    with pytest.raises(hipobj.InvalidArgumentError, match="neither the credentials nor the config"):
        hipobj.resolve_settings(profile="nope")
    home.setenv("HOME", str(tmp_path / "empty"))
    with pytest.raises(hipobj.InvalidArgumentError, match="no endpoint"):
        hipobj.resolve_settings()
    with pytest.raises(hipobj.InvalidArgumentError, match="no credentials"):
        hipobj.Client(endpoint="http://x:1")
    r = hipobj.resolve_settings(endpoint="http://x:1", access_key="k", secret_key="s")
    assert r["region"] == "us-east-1"
