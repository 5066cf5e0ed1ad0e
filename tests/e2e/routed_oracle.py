"""routed_oracle.py - the independent oracle of the stock-engine checks
(proxy_stock_check.py, gateway_pd_check.py): a prompt's counts summed in
numpy from the routing a stand-in wrote, and the worker a tau-0 band picks
for a count model over every layer (the centroid nearest the normalised
counts). Test-only."""
import numpy as np


def nearest_worker(cent, L, E, rows):
    c = np.zeros((L, E))
    for row in rows:
        for layer, ids in enumerate(row):
            for e in ids:
                c[layer, e] += 1
    s = c.ravel() / np.linalg.norm(c)
    return int(np.argmax(cent @ s))
