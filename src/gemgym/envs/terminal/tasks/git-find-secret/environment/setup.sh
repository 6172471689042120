git config --global user.email dev@example.com
git config --global user.name Dev
git config --global init.defaultBranch main
mkdir repo && cd repo && git init -q
printf 'host=db\nuser=app\n' > db.conf && git add . && git commit -qm 'Add db config'
printf 'host=db\nuser=app\npassword=Tr0ub4dor-9x\n' > db.conf && git commit -qam 'Configure db'
printf 'host=db\nuser=app\npassword=CHANGE_ME\n' > db.conf && git commit -qam 'Remove password'
echo readme > README && git add . && git commit -qm 'Add readme'
