"""bwd-suite: conformance and benchmarks for backward-pass kernels.

One import name of our own: the folders `suite`, `ops`, `golden`, `kernels`, `reports` and
`cases` of the repository are installed as `bwd_suite.suite`, `bwd_suite.ops`, ... so that
no other package of those common names (Hugging Face's `kernels`, say) can shadow ours or
be shadowed. Used in place from a checkout (the folders beside this one, not installed), the
package reaches them through its search path.
"""

from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parent.parent
_FOLDERS = ("suite", "ops", "golden", "kernels", "reports", "cases")
# a checkout (or an editable install of one): the sibling folders are our subpackages; an
# installed copy holds them inside this folder and never looks beside it
if not (Path(__file__).resolve().parent / "suite").is_dir() \
        and (_CHECKOUT / "suite" / "runner.py").is_file():
    __path__.append(str(_CHECKOUT))  # noqa: F821 - a package's own search path
