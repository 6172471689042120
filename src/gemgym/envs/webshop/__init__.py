"""WebShop (Yao et al., 2022): the shop, its pages, its reward and the ``webshop:*`` ids.

The env and its card are in :mod:`gemgym.envs.webshop.env`; the products, goals and search in
:mod:`gemgym.envs.webshop._catalogue`; the pages in :mod:`gemgym.envs.webshop._pages`; the reward
in :mod:`gemgym.envs.webshop._reward`. Nothing heavy is imported here (``bm25s`` loads when the
first search runs).
"""
