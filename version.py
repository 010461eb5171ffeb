"""nkic's version: a leaf module (no imports), so that the NEFF writer and the passes that stamp it need not import
the package root."""

__version__ = "0.1.0"
