"""nkic: an open compiler for NKI kernels built on xDSL.

Importing nkic has no side effects (it sets no environment variables and imports no sub-package).
"""

__version__ = "0.1.0"


def install_nki_alias() -> None:
    """Make ``import nki`` / ``nki.language`` / ``nki.isa`` / ``nki.compiler`` / ``nki.typing`` resolve to nkic's
    public NKI modules (``nkic.api`` and the frontend namespaces)."""
    from nkic.alias import install

    install()
