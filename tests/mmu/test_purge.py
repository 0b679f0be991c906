"""s14 forgetting for real: purge rewrites the log without the forgotten text (issue item 3).

The crash test is a real child process, killed (SIGKILL) at each step of the rewrite."""

import os
import signal

import pytest

from labmem.core.clock import SteppingClock
from labmem.mmu import ContextMMU, FileMemoryService, RecordNotFoundError
from tests.procs import run_child

SECRET = "The vault passphrase is tangerine-8841."
STEPS = ("start", "temp_written", "replaced")


def service(root):
    return FileMemoryService(root, clock=SteppingClock("2026-01-01T00:00:00Z"))


def remember(svc, text, key, **kw):
    return svc.remember("semantic", scope="alice", title=f"note {key}", text=text,
                        outcome="succeeded", evidence=[f"ev:{key}"],
                        source_kind="user_stated", origin_key=key, **kw)


def fill(root):
    """Three records; the secret is revised once (two versions on disk), then forgotten."""
    svc = service(root)
    keep = remember(svc, "The test port is 18300.", "port")
    secret = remember(svc, SECRET, "vault")
    svc.revise(secret.record_id, scope="alice", text=SECRET + " Rotate it monthly.",
               evidence=["ev:rotate"])
    other = remember(svc, "Deploys go through make release.", "deploy")
    svc.forget(secret.record_id, scope="alice")
    return svc, keep, secret, other


def bytes_under(root):
    found = {}
    for path in root.rglob("*"):
        if path.is_file():
            found[path.relative_to(root).as_posix()] = path.read_bytes()
    return found


def test_purge_removes_the_text_from_every_file_and_keeps_the_forget(tmp_path):
    svc, keep, secret, other = fill(tmp_path)
    assert any(SECRET.encode() in data for data in bytes_under(tmp_path).values())
    lines_before = svc.stats()["log_lines"]
    assert svc.purge() == 1
    for name, data in bytes_under(tmp_path).items():
        assert b"tangerine" not in data and b"vault passphrase" not in data, name
    assert svc.purge() == 0  # nothing left to purge
    stats = svc.stats()
    assert stats["log_lines"] == lines_before and stats["purged"] == 1
    assert stats["records"] == 2
    with pytest.raises(RecordNotFoundError):
        svc.recall_key(secret.record_id, scope="alice")
    # a replayed write of the forgotten memory is still refused, even after a restart
    again = service(tmp_path)
    replay = remember(again, SECRET, "vault")
    assert replay.record_id == secret.record_id and replay.status == "archived"
    assert SECRET not in replay.text
    assert again.stats()["log_lines"] == lines_before  # nothing was written
    # the other records are untouched, and new ids do not reuse the purged one
    assert again.recall_key(keep.record_id, scope="alice") == keep
    assert again.recall_key(other.record_id, scope="alice") == other
    fresh = remember(again, "A new note.", "new")
    assert fresh.record_id == "alice:m-000004"


def test_another_open_service_and_an_mmu_follow_the_rewritten_log(tmp_path):
    svc, keep, secret, other = fill(tmp_path)
    follower = service(tmp_path)
    mmu = ContextMMU(follower, token_budget=1_000)
    assert mmu.recall("test port", scope="alice").loaded == (keep.record_id,)
    svc.purge()
    late = remember(svc, "The test port moves to 18400.", "port")
    trace = mmu.recall("test port", scope="alice")  # the follower re-folds the new file
    assert trace.loaded == (late.record_id,)
    assert secret.record_id not in mmu.pages
    mmu.rebuild()
    assert sorted(mmu.pages) == sorted([other.record_id, late.record_id, keep.record_id])


def _purge_and_die_at(root, step):
    svc = FileMemoryService(root, clock=SteppingClock("2026-01-01T00:00:00Z"))

    def hook(name):
        if name == step:
            os.kill(os.getpid(), signal.SIGKILL)

    svc.fault_hook = hook
    svc.purge()
    os._exit(3)  # the hook never fired: the test fails on the exit code


@pytest.mark.parametrize("step", STEPS)
def test_a_crash_at_any_step_of_the_rewrite_leaves_a_readable_log_and_the_forget(tmp_path,
                                                                                 step):
    _, keep, secret, other = fill(tmp_path)
    assert run_child(_purge_and_die_at, tmp_path, step) == -signal.SIGKILL
    reopened = service(tmp_path)  # readable: every line parses
    with pytest.raises(RecordNotFoundError):
        reopened.recall_key(secret.record_id, scope="alice")
    assert reopened.recall_query("vault passphrase", 5, scope="alice") == ()
    assert {r.record_id for r in reopened.records() if r.visible} == {keep.record_id,
                                                                      other.record_id}
    purged_already = step == "replaced"
    assert reopened.stats()["purged"] == (1 if purged_already else 0)
    # a purge after the crash finishes the job and leaves no temp file behind
    assert reopened.purge() == (0 if purged_already else 1)
    files = bytes_under(tmp_path)
    assert not [n for n in files if n.endswith(".tmp")]
    assert not any(b"tangerine" in data for data in files.values())
