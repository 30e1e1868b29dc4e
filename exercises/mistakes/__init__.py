"""The mistakes each check must catch: a reference solution with one mistake edited in. They are the errors learners
make, and where a check once passed a wrong answer (an independent reviewer's, written from the task alone), that
answer is here.

One file per exercise, exercises/mistakes/<the exercise's file name>.toml: for each mistake its name, what is wrong
(why), words its diagnosis must contain (expect), where needed the first torch release it is a mistake on
(torch_from), and its edits of the solution, each replacing text (old) that stands once in the solution, so a mistake
cannot silently stop applying when a solution changes.
tests/test_exercise_mistakes.py writes each one out and proves its check fails with that diagnosis.

A file may also hold right answers other than the solution ([[right]]: name, why, edits), where a check once failed a
right answer: tests/test_exercises.py proves its check passes them.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from .. import checks  # noqa: F401 - registers the exercises
from ..toolkit import EXERCISES, FOLDER


@dataclass(frozen=True)
class Mistake:
    exercise: str
    name: str
    why: str
    expect: str
    edits: list[tuple[str, str]]
    torch_from: str = ""  # the first torch release on which this is a mistake, where earlier ones behave otherwise

    def text(self) -> str:
        """The reference solution with this mistake's edits made."""
        solution = (FOLDER / "solutions" / EXERCISES[self.exercise].file).read_text()
        for old, _ in self.edits:
            assert solution.count(old) == 1, f"{self.exercise} {self.name}: {old!r} is not once in its solution"
        text, done = "", 0
        for old, new in sorted(self.edits, key=lambda edit: solution.index(edit[0])):
            start = solution.index(old)
            text += solution[done:start] + new
            done = start + len(old)
        return text + solution[done:]

    def write_under(self, folder: Path) -> Path:
        """This answer's file, folder/<exercise>.<name>/<the exercise's file>: the same path on every run, rewritten
        only when the text changed, so that a C++ answer's build is found up to date (ninja rebuilds a library whose
        source path changed)."""
        path = folder / f"{self.exercise}.{self.name}" / EXERCISES[self.exercise].file
        path.parent.mkdir(parents=True, exist_ok=True)
        text = self.text()
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        return path


def read(exercise_id: str, kind: str = "mistake") -> list[Mistake]:
    """The mistakes of one exercise, from its file in exercises/mistakes/; with kind "right", its right answers (their
    expect empty: a right answer passes)."""
    path = FOLDER / "mistakes" / f"{EXERCISES[exercise_id].file.rsplit('.', 1)[0]}.toml"
    return [Mistake(exercise_id, record["name"], record["why"], record.get("expect", ""),
                    [(edit["old"], edit["new"]) for edit in record["edit"]], record.get("torch_from", ""))
            for record in tomllib.loads(path.read_text()).get(kind, [])]


MISTAKES = [mistake for exercise_id in sorted(EXERCISES) for mistake in read(exercise_id)]
RIGHT_ANSWERS = [answer for exercise_id in sorted(EXERCISES) for answer in read(exercise_id, "right")]
