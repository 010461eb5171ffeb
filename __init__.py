"""nkic: an open compiler for NKI kernels built on xDSL."""

__version__ = "0.1.0"


def install_nki_alias() -> None:
    """Make ``import nki`` / ``nki.language`` / ``nki.isa`` resolve to nkic's frontend."""
    from nkic.frontend.alias import install

    install()
