git config --global user.email dev@example.com
git config --global user.name Dev
git config --global init.defaultBranch main
mkdir repo && cd repo && git init -q
printf 'DEBUG = False\nNAME = "shop"\n' > settings.py && git add . && git commit -qm 'Add settings'
printf 'DEBUG = True\nNAME = "shop"\n' > settings.py && git commit -qam 'Tweak settings'
printf 'def total(xs):\n    return sum(xs)\n' > cart.py && git add . && git commit -qm 'Add cart'
printf 'DEBUG = True\nNAME = "shop"\nCURRENCY = "EUR"\n' > settings.py && git commit -qam 'Add currency'
