"""The spec library: where shipped specs live (hwspecs/, workloads/, studies/, ...) and how a
name or a path resolves to a file, beside the referring file first, then in the library."""

from __future__ import annotations

import difflib
import errno
from pathlib import Path

from dse.errors import Issue, SpecError

_PACKAGE_DIR = Path(__file__).resolve().parent.parent


LIBRARY_FOLDERS = {"hardware": "hwspecs", "workload": "workloads", "study": "studies",
                   "validation": "validation", "technology": "hwspecs/tech",
                   "lengths": "workloads/lengths", "stack": "stacks"}


def library_dir(kind: str) -> Path:
    """Folder of shipped specs of `kind`: inside the installed package (wheel), else the
    repository root (source checkout or editable install)."""
    folder = LIBRARY_FOLDERS[kind]
    packaged = _PACKAGE_DIR / "_data" / folder
    return packaged if packaged.is_dir() else _PACKAGE_DIR.parent / folder


def library_names(kind: str) -> list[str]:
    """Names of the shipped specs of `kind`, sorted."""
    folder = library_dir(kind)
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def looks_like_path(ref: str) -> bool:
    """Whether a reference names a file (a path, or a .yaml name) rather than a library name."""
    return "/" in ref or "\\" in ref or ref.endswith((".yaml", ".yml"))


def is_spec_file(path: Path, ref: str) -> bool:
    """Whether `path` is a file (a regular file, or anything else that is not a folder:
    reading it says what is wrong); a name too long for the system is refused."""
    try:
        return path.exists() and not path.is_dir()
    except OSError as e:
        if e.errno == errno.ENAMETOOLONG:
            raise SpecError([Issue(shown_ref(ref), None, None, "", f"name too long ({len(ref)} "
                                   "characters; a file name has at most 255 bytes)")]
                            ) from None
        return True  # let reading the file say what is wrong (permission denied ...)


def shown_ref(ref: str, most: int = 60) -> str:
    """A name as an error shows it: cut in the middle when long."""
    return ref if len(ref) <= most else f"{ref[:most // 2]}…{ref[-(most // 2):]}"


def resolve(ref: str | Path, kind: str, near: Path | None = None) -> Path:
    """The file a name or path refers to. Raises DseError-style SpecError if none."""
    ref_s = str(ref)
    if isinstance(ref, Path) or looks_like_path(ref_s):
        path = Path(ref_s).expanduser()
        if near is not None and not path.is_absolute():
            path = near / path
        if not is_spec_file(path, ref_s):
            raise SpecError([Issue(shown_ref(ref_s), None, None, "", "file not found")])
        return path
    candidates = ([near / f"{ref_s}.yaml"] if near is not None else []) + [
        library_dir(kind) / f"{ref_s}.yaml"]
    for path in candidates:
        if is_spec_file(path, ref_s):
            return path
    names = library_names(kind)
    close = difflib.get_close_matches(ref_s, names, n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(close)}?" if close else f"shipped: {', '.join(names)}"
    raise SpecError([Issue(shown_ref(ref_s), None, None, "",
                           f"unknown {kind} '{shown_ref(ref_s)}' ({hint})")])
