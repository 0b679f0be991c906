"""What the library shows a learner follows the notebook's language: checker feedback,
contract reports and the library's figures answer in Chinese in the Chinese edition, and in
English exactly as before.

Everything runs the real checkers, suites and drawing helpers; the language is chosen with
``use_language`` (or ``$LABMEM_LANG`` in a subprocess), as a kernel in ``notebooks/zh/`` does.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import subprocess
import sys

import pytest

from labmem.core.i18n import LanguageError, label, use_language
from labmem.exercises import CHAPTER_MODULES, Feedback, s09, s10, s11, s12, s13
from labmem.exercises.suites.s09 import SUITE as S09_SUITE
from tests.i18n.conftest import ROOT, load_i18n

CJK = re.compile(r"[\u3400-\u9fff]")
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)((?:[:!][^{}]*)?)\}")
ZH = "zh_CN"


def _stub(*args, **kwargs):
    raise NotImplementedError


def _nothing(*args, **kwargs):
    return None


# -- English: byte-identical to the messages the notebooks store --------------------------

@pytest.mark.parametrize(("shown", "english"), [
    (lambda: s09.check_selectable(None),
     "✗ exercise 1 (selectable events): not answered yet — replace None with your answer"),
    (lambda: s09.check_selectable({1, 2}),
     "✗ exercise 1 (selectable events): reasoning is scratch work: it is not even replayed"),
    (lambda: s09.check_selectable({1}),
     "✗ exercise 1 (selectable events): only message and file-history-snapshot events are "
     "eligible"),
    (lambda: s11.check_statuses(["created"]),
     "✗ exercise 1 (statuses): there are 7 writes; you gave 1 statuses"),
    (lambda: s12.check_score_by_hand("x"),
     "✗ exercise 2 (score by hand): expected a number, got str"),
    (lambda: s13.check_deleted(3),
     "✗ s13.2 cleanup deletions: give a set of file labels such as {'A'}"),
    (lambda: s10.BUILD[0].check(3),
     "✗ s10 build: is_promotable: pass your function itself, not 3"),
    (lambda: s10.BUILD[0].check(_stub),
     "✗ s10 build: is_promotable: not written yet — replace the `raise NotImplementedError` "
     "with your code"),
    (lambda: s10.BUILD[0].check(_nothing),
     "✗ s10 build: is_promotable: on facts [f1 importance 1 evidence (none)] with "
     "minimum_importance=1, repeat_threshold=1 yours returned None, the library's returned "
     "True. Hint: importance alone can promote a group; otherwise count independent evidence "
     "(distinct evidence ids), not lines"),
])
def test_english_feedback_is_what_it_was(shown, english):
    with use_language("en"):
        assert repr(shown()) == english


def test_an_english_contract_report_is_what_it_was():
    with use_language("en"):
        report = repr(s09.check_layer(read_log=_stub))
    assert report.startswith(
        "✗ your transcript passes 3 of 15 contracts; failing:\n"
        "  · each append gets the next sequence, its event id, the session and the clock's "
        "time — not written yet (_stub() raises NotImplementedError)\n")
    with use_language("en"):
        assert repr(S09_SUITE.run(s09.scratch, who="the from-scratch")) == \
            "✓ the from-scratch transcript passes all 15 contracts"


# -- Chinese: feedback, reports, figures ----------------------------------------------------

@pytest.mark.parametrize(("shown", "english"), [
    (lambda: s09.check_selectable({1, 5, 6}),
     "messages and file snapshots are evidence worth pointing at"),
    (lambda: s09.check_selectable({1, 2}), "reasoning is scratch work"),
    (lambda: s09.check_window(2), "look at what the first message"),
    (lambda: s11.check_statuses(["created"]), "there are 7 writes"),
    (lambda: s12.check_score_by_hand("x"), "expected a number"),
    (lambda: s13.check_deleted(3), "give a set of file labels"),
    (lambda: s10.BUILD[0].check(_nothing), "yours returned None"),
    (lambda: s09.check_window(None), "not answered yet"),
])
def test_feedback_answers_in_chinese(shown, english):
    with use_language(ZH):
        feedback = shown()
    shown_text = repr(feedback)
    assert CJK.search(feedback.exercise) and CJK.search(feedback.message), shown_text
    assert english not in shown_text


def test_a_right_answer_is_praised_in_chinese_and_still_right():
    with use_language(ZH):
        feedback = s09.check_selectable({1, 5, 6})
    assert feedback.ok and repr(feedback).startswith("✓ 练习 1")


def test_a_contract_report_renders_in_chinese_but_its_names_stay_english():
    with use_language("en"):
        english = s09.check_layer(read_log=_stub)
    with use_language(ZH):
        chinese = s09.check_layer(read_log=_stub)
        shown = repr(chinese)
    assert chinese.failing_names == english.failing_names
    assert all(CJK.search(name) is None for name in chinese.failing_names)
    assert shown.startswith("✗ 你的会话记录：15 条契约通过了 3 条；")
    for name in english.failing_names:
        assert name not in shown
        assert label_in(ZH, name) in shown
    assert "not written yet" not in shown and "还没有实现" in shown


def label_in(code: str, text: str) -> str:
    with use_language(code):
        return label(text)


def test_a_passing_report_in_chinese():
    with use_language(ZH):
        shown = repr(S09_SUITE.run(s09.scratch, who="the from-scratch"))
    assert shown == "✓ 从零实现的会话记录：全部 15 条契约都已通过"


def test_every_suite_names_its_layer_and_contracts_in_chinese():
    for exercise_module in CHAPTER_MODULES:
        suite = importlib.import_module(f"labmem.exercises.suites.{exercise_module}").SUITE
        with use_language(ZH):
            assert CJK.search(label(suite.layer)) or label(suite.layer) == "Context MMU"
            for name in suite.names():
                assert CJK.search(label(name)), (exercise_module, name)


#: answers that reach most wrong-answer branches of the predict checkers
_ANSWERS = (None, "x", 0, 3, 0.5, True, [], (), set(), {}, [1], {1, 2}, (1, 2, 3),
            (5, True, 6), ["a", "b"], {"a": "b"})


def _checkers():
    for name in CHAPTER_MODULES:
        module = importlib.import_module(f"labmem.exercises.{name}")
        for function_name, function in inspect.getmembers(module, inspect.isfunction):
            if (function_name.startswith("check_") and function.__module__ == module.__name__
                    and function_name not in ("check_layer", "check_policy")):
                yield f"{name}.{function_name}", function


@pytest.mark.parametrize(("name", "check"), list(_checkers()))
def test_every_checker_answers_in_chinese_on_its_wrong_paths(name, check):
    """Each answer runs in English and in Chinese: the same verdict, the Chinese one in
    Chinese (a translated template whose placeholders do not match raises KeyError here)."""
    for answer in _ANSWERS:
        with use_language("en"):
            try:
                english = check(answer)
            except Exception as exc:  # the checker refuses this input in English too
                english = type(exc)
        with use_language(ZH):
            try:
                chinese = check(answer)
            except Exception as exc:
                chinese = type(exc)
        if isinstance(english, type):
            assert chinese is english, (name, answer)
            continue
        assert isinstance(chinese, Feedback), (name, answer, chinese)
        assert chinese.ok == english.ok, (name, answer)
        assert CJK.search(chinese.message) and chinese.message != english.message, \
            (name, answer, repr(chinese))


@pytest.mark.parametrize("name", [n for n in CHAPTER_MODULES
                                  if importlib.import_module(f"labmem.exercises.{n}").BUILD])
def test_build_exercises_answer_in_chinese(name):
    for exercise in importlib.import_module(f"labmem.exercises.{name}").BUILD:
        for yours in (3, _stub, _nothing):
            with use_language(ZH):
                feedback = exercise.check(yours)
            assert not feedback.ok and CJK.search(repr(feedback)), repr(feedback)
            assert "Hint:" not in feedback.message and " build: " not in feedback.exercise


def test_the_library_figures_draw_in_chinese_and_english_alike():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from labmem.notebook import DIAGRAMS, _use_label_font, draw_chapter_map, draw_diagram

    for code in (ZH, "en"):  # English last: it leaves matplotlib's default font behind
        with use_language(code):
            _use_label_font()
            figures = [draw_chapter_map(), *(draw_diagram(d) for d in DIAGRAMS.values())]
        for fig in figures:
            texts = [t.get_text() for ax in fig.axes for t in ax.texts + [ax.title]]
            chinese = any(CJK.search(t) for t in texts) or CJK.search(fig._labmem_alt)
            assert bool(chinese) == (code == ZH), texts[:3]
            plt.close(fig)


def _columns(text: str) -> float:
    # an 8 pt CJK glyph is about 1.75 times the average Latin letter the boxes are sized by
    return sum(1.75 if CJK.match(c) or "\uff00" <= c <= "\uffef" or "\u3000" <= c <= "\u303f"
               else 1.0 for c in text)


def test_translated_box_labels_fit_the_boxes_sized_for_the_english():
    from labmem.notebook import DIAGRAMS

    too_wide = []
    for key, diagram in DIAGRAMS.items():
        for box in diagram.boxes:
            with use_language(ZH):
                shown = label(box.label)
            english = box.label.split("\n")
            lines = shown.split("\n")
            if len(lines) > len(english) or max(map(_columns, lines)) > max(map(len, english)) + 2:
                too_wide.append((key, box.key, shown))
    assert not too_wide


# -- the catalogue ----------------------------------------------------------------------------

def _runtime_messages():
    i18n = load_i18n()
    return [m for m in i18n._read(i18n.RUNTIME_PO) if m.id]


def test_every_runtime_message_is_translated_with_the_same_placeholders():
    messages = _runtime_messages()
    assert len(messages) > 500
    for m in messages:
        assert m.string and not m.fuzzy, m.id
        assert sorted(PLACEHOLDER.findall(m.id)) == sorted(PLACEHOLDER.findall(m.string)), m.id


def test_every_translated_template_formats_with_the_english_arguments():
    for m in _runtime_messages():
        names = {name for name, _spec in PLACEHOLDER.findall(m.id)}
        if not names:
            continue
        arguments = dict.fromkeys(names, 1234.5)
        m.id.format(**arguments)
        m.string.format(**arguments)  # a KeyError or ValueError fails here


def test_the_compiled_catalogue_is_current():
    i18n = load_i18n()
    assert i18n.RUNTIME_MO.read_bytes() == i18n.mo_bytes()


# -- the language rule, in a fresh process ------------------------------------------------------

def _run(code: str, language: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "LABMEM_LANG": language}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, text=True,
                          capture_output=True, timeout=120)


def test_labmem_lang_chooses_chinese_in_a_fresh_process():
    done = _run("from labmem.core.i18n import label; print(label('Transcript'))", ZH)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "会话记录"
    done = _run("from labmem.core.i18n import label; print(label('Transcript'))", "en")
    assert done.stdout.strip() == "Transcript"


def test_a_bad_labmem_lang_is_refused_by_name():
    done = _run("from labmem.core.i18n import label; label('Transcript')", "klingon")
    assert done.returncode != 0
    assert "LanguageError" in done.stderr and "LABMEM_LANG" in done.stderr
    with pytest.raises(LanguageError, match="language"), use_language("klingon"):
        pass
