"""Build step that ships the data folders inside the package (metadata lives in pyproject.toml).

The repository keeps tasks/, judges/, baselines/ and results/paper/ at the top level, the one
editable copy. Building a wheel (or installing non-editable) copies them into
``mascot_eval/_data/{tasks,judges,baselines,paper}``, which ``mascot_eval.paths`` reads through
importlib.resources. An editable install copies nothing: it reads the checkout's folders.
MANIFEST.in puts the same folders into the sdist, so a wheel built from the sdist has them too.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
# folder inside mascot_eval/_data -> folder in the repository (keep in step with mascot_eval/paths.py)
DATA_FOLDERS = {"tasks": "tasks", "judges": "judges", "baselines": "baselines", "paper": "results/paper"}


def data_files() -> list[tuple[Path, Path]]:
    """(source, path inside the package) for every shipped data file; hidden files and caches are skipped."""
    out = []
    for dest, src in DATA_FOLDERS.items():
        root = HERE / src
        if not root.is_dir():
            raise SystemExit(f"setup.py: {root} is missing; build from a checkout or an sdist that has it")
        for f in sorted(root.rglob("*")):
            rel = f.relative_to(root)
            if f.is_file() and not any(part.startswith(".") or part == "__pycache__" for part in rel.parts):
                out.append((f, Path("mascot_eval", "_data", dest, rel)))
    return out


class BuildPyWithData(build_py):
    """build_py that also copies the data folders into the package (not in editable mode)."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for src, rel in data_files():
            target = Path(self.build_lib) / rel
            self.mkpath(str(target.parent))
            self.copy_file(str(src), str(target))

    def get_outputs(self, include_bytecode=True):
        extra = [] if getattr(self, "editable_mode", False) else [str(Path(self.build_lib) / rel) for _, rel in data_files()]
        return super().get_outputs(include_bytecode) + extra


setup(cmdclass={"build_py": BuildPyWithData})
