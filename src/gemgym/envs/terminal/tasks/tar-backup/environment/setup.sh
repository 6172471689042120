mkdir -p project/src project/node_modules/lib project/logs
echo 'main' > project/src/main.js
echo 'util' > project/src/util.js
echo 'secret=1' > project/.env
echo 'dep' > project/node_modules/lib/index.js
echo 'old' > project/logs/app.log
echo 'x' > project/debug.log
echo '# readme' > project/README.md
