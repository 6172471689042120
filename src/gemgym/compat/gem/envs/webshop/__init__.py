"""``gem.envs.webshop``: GEM's WebShop package path."""
