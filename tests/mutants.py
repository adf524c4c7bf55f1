"""Run a test of posenc's suite on the deliberately wrong code of ``posenc.bugs`` too.

A test that names itself as the one that catches a bug (``posenc.bugs.BUGS[name].caught_by``)
takes an ``impl`` parameter: ``"posenc"`` runs it on posenc, the bug's name runs the same
test body, with the same bounds, on the wrong code. The bug's case is a strict ``xfail`` that
must fail with an ``AssertionError``: if the test ever passed on the wrong code (a loosened
bound, a check that no longer calls the code), the suite would fail with XPASS, and an error
of another kind (a crash instead of a failed check) fails it too.
"""

from __future__ import annotations

import importlib

import pytest

from posenc import bugs


def bug_param(name: str, *values):
    """A ``pytest.param`` of ``values`` followed by the bug's name, a strict xfail."""
    bug = bugs.BUGS[name]
    mark = pytest.mark.xfail(strict=True, raises=AssertionError,
                             reason=f"posenc.bugs {name!r} is wrong on purpose: {bug.title}")
    return pytest.param(*values, name, marks=mark, id="-".join([*map(str, values), name]))


def and_the_bugs(*names: str):
    """Parametrize a test's ``impl`` over ``"posenc"`` and the named bugs (strict xfails)."""
    return pytest.mark.parametrize("impl", ["posenc", *(bug_param(n) for n in names)])


def wrong_code(name: str, face: str = "numpy"):
    """The wrong code of the bug ``name``: in ``posenc.bugs`` for a framework-free bug, else
    in the face's module (``face`` is ``"torch"`` or ``"keras"``)."""
    bug = bugs.BUGS[name]
    if bug.faces == ("numpy",):
        return getattr(bugs, bug.wrong)
    return getattr(importlib.import_module(f"posenc.{face}.bugs"), bug.wrong)
