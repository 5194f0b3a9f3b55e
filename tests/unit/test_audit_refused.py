"""An audit entry Redis refused (issue 39's chaos run, seed 8: Redis SIGSTOPped while a
click was audited): logged as lost, with what it was, and counted as a refusal; not an
internal error of ours. Any other failure of the audit still is one."""

from __future__ import annotations

import logging
from typing import Any, cast

import pytest
from redis.exceptions import TimeoutError as RedisTimeout

from bot.chat.interactions import ApprovalDesk
from bot.core import metrics


def desk(error: Exception) -> ApprovalDesk:
    def audit(*_: object) -> None:
        raise error

    return ApprovalDesk(cast(Any, None), cast(Any, None), cast(Any, None), audit=audit)


def refusals() -> float:
    return metrics.REDIS_REFUSALS.labels(reason="timeout", where="audit")._value.get()


def test_an_audit_entry_redis_refused_is_said_lost_not_an_error(
        caplog: pytest.LogCaptureFixture) -> None:
    before = refusals()
    with caplog.at_level(logging.WARNING):
        desk(RedisTimeout("Timeout reading from 127.0.0.1:6379"))._audit(
            "INC-7", "UALICE", "approval.approved", {"approval_id": "ap-1"})
    said = [r for r in caplog.records if "audit entry lost" in r.getMessage()]
    assert said and said[0].levelno == logging.WARNING
    assert "INC-7 approval.approved by UALICE" in said[0].getMessage()
    assert not [r for r in caplog.records if "internal error" in r.getMessage()]
    assert refusals() == before + 1


def test_any_other_audit_failure_is_still_an_internal_error(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        desk(ValueError("a bug of ours"))._audit("INC-7", "UALICE", "approval.approved", {})
    assert [r for r in caplog.records if "internal error" in r.getMessage()]
    assert not [r for r in caplog.records if "audit entry lost" in r.getMessage()]
