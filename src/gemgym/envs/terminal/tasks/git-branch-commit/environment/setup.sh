git config --global user.email dev@example.com
git config --global user.name Dev
git config --global init.defaultBranch main
mkdir repo && cd repo && git init -q
echo 'print("v1")' > app.py && git add app.py && git commit -qm 'Initial commit'
echo 'print("v2")' > app.py
echo 'hello' > greeting.txt
