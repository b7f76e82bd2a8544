"""The soak under faults in CI (issue 22 §5): every operation under every profile, a few seconds each.

Under every profile (latency, 5xx storms, resets after N body bytes, truncated bodies, truncated heads and
redirects, stalls past the read time-out): no wrong data, no hang, no unclear error (an error is allowed, if it is
one line naming the URL). Under the transient profile (20 % 5xx, 5 % resets, 5 % truncations, a stall in 50
requests, scaled down to 2 s against a read time-out of 0.5 s): every operation gives the exact answer.
``benchmarks/bench_faults.py`` runs the longer soak and prints the table.
"""

from __future__ import annotations

import pytest

from testkit.soak import SOAK_PROFILES, TRANSIENT, Soak, table

pytest.importorskip("torch")


@pytest.fixture
def soak(tmp_path, s3_proxy, s3_bucket, http_proxy, webhdfs_proxy) -> Soak:
    return Soak(tmp_path / "soak", s3_proxy, http_proxy, webhdfs_proxy, s3_bucket)


@pytest.mark.parametrize("profile", list(SOAK_PROFILES))
def test_soak(soak, profile):
    outcomes = soak.run(profile, SOAK_PROFILES[profile], seed=22)
    shown = table(outcomes)
    assert all(o.requests > 0 for o in outcomes), shown  # (every operation went through the proxies)
    assert [o for o in outcomes if o.verdict in ("wrong", "hang", "unclear")] == [], shown
    if profile == TRANSIENT:
        assert [o for o in outcomes if o.verdict != "ok"] == [], shown
