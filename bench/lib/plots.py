"""matplotlib for the drivers' PNGs (Agg backend, no display). Plots are
optional: pyplot() raises ImportError when python3-matplotlib is missing,
and drivers catch it and keep their CSV/markdown."""


def pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def save(fig, path, dpi=90):
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
