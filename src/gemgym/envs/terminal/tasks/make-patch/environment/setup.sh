mkdir -p old/lib new/lib
printf 'one\ntwo\nthree\n' > old/a.txt
printf 'one\n2\nthree\nfour\n' > new/a.txt
printf 'def f():\n    return 1\n' > old/lib/mod.py
printf 'def f():\n    return 2\n' > new/lib/mod.py
printf 'gone\n' > old/removed.txt
printf 'fresh\n' > new/lib/added.txt
