"""Generate the embedded terminal task suite: `python -m collectors.terminal.make_tasks`.

Deterministic: rerunning rewrites `tasks.jsonl` byte for byte, so the JSONL diff is the review.
Each task names the workspaces its setup builds (see workspaces.py) and carries a short scripted
solution that the `scripted` policy plays (the oracle). A task that leaves a checkable end state has
check commands (`CHECKS`, a "command" verifier: the share of checks that pass is the reward); the
others ask to show or report something, whose answer is on the screen, and say so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from collectors.terminal.workspaces import setup_for

OUT = Path(__file__).with_name("tasks.jsonl")


def cmd(command: str, timeout: float | None = None) -> dict[str, Any]:
    return {"command": command} if timeout is None else {"command": command, "timeout": timeout}


def keys(*items: str | tuple[str, float]) -> dict[str, Any]:
    """Keystrokes; a bare string waits 0.3 s after it is sent."""
    pairs = [item if isinstance(item, tuple) else (item, 0.3) for item in items]
    return {"keystrokes": [{"keystrokes": text, "duration": duration} for text, duration in pairs]}


# (category, id, workspaces, instruction, actions)
# fmt: off
TASKS: list[tuple[str, str, tuple[str, ...], str, list[dict[str, Any]]]] = [
    ('navigation', 'nav-list-home', ('webapp', 'notes'),
     'List everything in the home directory, hidden files too.',
     [cmd('ls -la')]),
    ('navigation', 'nav-enter-src', ('webapp',),
     'Go into the webapp source directory and show where you are.',
     [cmd('cd webapp/src'), cmd('pwd'), cmd('ls')]),
    ('navigation', 'nav-find-deepest', ('projects',), 'Find the most deeply nested directory under projects.',
     [cmd('find projects -type d'), cmd('cd projects/gamma/assets/img'), cmd('pwd')]),
    ('navigation', 'nav-tree-sizes', ('projects', 'logs'),
     'Show how much disk space each top-level folder uses.',
     [cmd('du -sh */'), cmd('du -a projects | sort -n | tail -3')]),
    ('navigation', 'nav-back-and-forth', ('projects',),
     'Visit projects/alpha/docs, then return to the previous dir.',
     [cmd('cd projects/alpha/docs'), cmd('cd -'), cmd('pwd')]),
    ('navigation', 'nav-find-python', ('webapp', 'scripts', 'projects'), 'List every Python file under home.',
     [cmd("find . -name '*.py' | sort")]),
    ('navigation', 'nav-newest-file', ('logs', 'notes'), 'Which file under logs was modified most recently?',
     [cmd('ls -lt logs'), cmd('ls -t logs | head -1')]),
    ('navigation', 'nav-count-files', ('projects',), 'Count the regular files under projects.',
     [cmd('find projects -type f | wc -l')]),
    ('navigation', 'nav-file-types', ('projects', 'scripts'), 'Report the type of every file in scripts.',
     [cmd('file scripts/*')]),
    ('navigation', 'nav-home-shortcut', ('webapp',),
     'Go deep into webapp/tests, then jump home with one command.',
     [cmd('cd webapp/tests'), cmd('cd'), cmd('pwd')]),
    ('navigation', 'nav-hidden', ('notes',),
     'Create a hidden config file in notes and show that ls hides it.',
     [cmd('touch notes/.config'), cmd('ls notes'), cmd('ls -A notes')]),
    ('navigation', 'nav-stat', ('webapp',), 'Show size and permissions of webapp/config.ini.',
     [cmd('stat webapp/config.ini'), cmd('ls -l webapp/config.ini')]),
    ('files', 'files-create-notes', (), 'Create a file notes.txt with three lines of text.',
     [cmd("printf 'first\\nsecond\\nthird\\n' > notes.txt"), cmd('cat notes.txt')]),
    ('files', 'files-append', ('notes',), "Append 'water plants' to the todo list.",
     [cmd("echo 'water plants' >> notes/todo.txt"), cmd('tail -2 notes/todo.txt')]),
    ('files', 'files-copy-backup', ('webapp',), 'Back up webapp/config.ini to config.ini.bak next to it.',
     [cmd('cp webapp/config.ini webapp/config.ini.bak'), cmd('ls webapp')]),
    ('files', 'files-rename', ('notes',), 'Rename ideas.md to ideas-2024.md.',
     [cmd('mv notes/ideas.md notes/ideas-2024.md'), cmd('ls notes')]),
    ('files', 'files-mkdir-tree', (), 'Create src, tests and docs folders for a new project called tool.',
     [cmd('mkdir -p tool/src tool/tests tool/docs'), cmd('find tool')]),
    ('files', 'files-remove-logs', ('logs',), 'Delete the rotated logs in logs/old.',
     [cmd('rm -r logs/old'), cmd('ls logs')]),
    ('files', 'files-edit-sed', ('webapp',), 'Change the port in webapp/config.ini to 9090.',
     [cmd("sed -i 's/port = 8080/port = 9090/' webapp/config.ini"), cmd('grep port webapp/config.ini')]),
    ('files', 'files-touch-many', (), 'Create report-1.txt .. report-5.txt in one command.',
     [cmd('touch report-{1..5}.txt'), cmd('ls report-*')]),
    ('files', 'files-chmod-script', ('scripts',), 'Make scripts/backup.sh executable and run it.',
     [cmd('chmod +x scripts/backup.sh'), cmd('ls -l scripts/backup.sh'), cmd('./scripts/backup.sh')]),
    ('files', 'files-tar', ('notes',), 'Pack the notes folder into notes.tar.gz and list the archive.',
     [cmd('tar czf notes.tar.gz notes'), cmd('tar tzf notes.tar.gz')]),
    ('files', 'files-gzip', ('logs',), 'Compress logs/access.log and look at the size.',
     [cmd('gzip -k logs/access.log'), cmd('ls -l logs')]),
    ('files', 'files-diff', ('webapp',), 'Copy config.ini, change debug to true in the copy, and diff them.',
     [cmd('cp webapp/config.ini /tmp/c.ini'), cmd("sed -i 's/debug = false/debug = true/' /tmp/c.ini"),
      cmd('diff webapp/config.ini /tmp/c.ini')]),
    ('files', 'files-symlink', ('logs',), 'Create a link current.log pointing to logs/access.log.',
     [cmd('ln -s logs/access.log current.log'), cmd('ls -l current.log'), cmd('head -2 current.log')]),
    ('files', 'files-heredoc', (), 'Write a small shell script with a here-document and run it.',
     [cmd("printf '#!/bin/sh\\necho built at $(date +%%Y)\\n' > build.sh"), cmd('sh build.sh')]),
    ('files', 'files-empty-check', ('projects',), 'Find empty files and directories under projects.',
     [cmd('touch projects/beta/EMPTY'), cmd('find projects -empty')]),
    ('text', 'text-grep-errors', ('webapp',), 'Show all ERROR lines of webapp/logs/app.log.',
     [cmd('grep ERROR webapp/logs/app.log')]),
    ('text', 'text-count-errors', ('webapp',), 'Count ERROR lines in webapp/logs/app.log.',
     [cmd('grep -c ERROR webapp/logs/app.log')]),
    ('text', 'text-level-histogram', ('webapp',), 'Count log lines per level in webapp/logs/app.log.',
     [cmd("awk '{print $3}' webapp/logs/app.log | sort | uniq -c")]),
    ('text', 'text-csv-column', ('sales',), 'Print the region column of data/sales.csv without the header.',
     [cmd('cut -d, -f2 data/sales.csv | tail -n +2')]),
    ('text', 'text-csv-sum', ('sales',), 'Compute the total units sold in data/sales.csv.',
     [cmd("awk -F, 'NR>1 {s+=$4} END {print s}' data/sales.csv")]),
    ('text', 'text-csv-by-region', ('sales',), 'Total units per region in data/sales.csv, largest first.',
     [cmd("awk -F, 'NR>1 {u[$2]+=$4} END {for (r in u) print u[r], r}' data/sales.csv | sort -rn")]),
    ('text', 'text-csv-revenue', ('sales',), 'Compute revenue (units*price) per product.',
     [cmd('awk -F, \'NR>1 {r[$3]+=$4*$5} END {for (p in r) printf "%s %.2f\\n", p, r[p]}\' data/sales.csv')]),
    ('text', 'text-unique-products', ('sales',), 'List the distinct products in data/sales.csv.',
     [cmd('tail -n +2 data/sales.csv | cut -d, -f3 | sort -u')]),
    ('text', 'text-top-ips', ('logs',), 'Which IP addresses hit the server most often?',
     [cmd("awk '{print $1}' logs/access.log | sort | uniq -c | sort -rn | head -3")]),
    ('text', 'text-status-codes', ('logs',), 'Count responses by HTTP status in logs/access.log.',
     [cmd("awk '{print $9}' logs/access.log | sort | uniq -c | sort -rn")]),
    ('text', 'text-404-paths', ('logs',), 'Which paths returned 404?',
     [cmd("grep ' 404 ' logs/access.log | awk '{print $7}' | sort -u")]),
    ('text', 'text-dedupe-todo', ('notes',), 'Remove duplicate entries from notes/todo.txt, keeping order.',
     [cmd("awk '!seen[$0]++' notes/todo.txt > /tmp/todo && mv /tmp/todo notes/todo.txt"),
      cmd('cat notes/todo.txt')]),
    ('text', 'text-wc', ('webapp',), 'How many lines, words and bytes are in webapp/src/app.py?',
     [cmd('wc webapp/src/app.py')]),
    ('text', 'text-sed-replace', ('notes',), "Replace 'fix bike' with 'repair bike' in notes/todo.txt.",
     [cmd("sed -i 's/fix bike/repair bike/g' notes/todo.txt"), cmd('cat notes/todo.txt')]),
    ('text', 'text-sed-lines', ('webapp',), 'Print lines 10 to 15 of webapp/logs/app.log.',
     [cmd("sed -n '10,15p' webapp/logs/app.log")]),
    ('text', 'text-tr-upper', ('notes',), 'Print notes/todo.txt in upper case.',
     [cmd('tr a-z A-Z < notes/todo.txt')]),
    ('text', 'text-grep-recursive', ('webapp', 'projects'), 'Find every file that defines a Python function.',
     [cmd("grep -rn 'def ' --include='*.py' .")]),
    ('text', 'text-grep-context', ('webapp',), 'Show each ERROR in app.log with one line of context.',
     [cmd('grep -C1 ERROR webapp/logs/app.log | head -20')]),
    ('text', 'text-sort-csv', ('sales',), 'Sort sales.csv rows by units, descending, keep the header.',
     [cmd('(head -1 data/sales.csv; tail -n +2 data/sales.csv | sort -t, -k4 -rn) | head -8')]),
    ('text', 'text-join-csv', ('sales',), 'Show customer names with their city, sorted by city.',
     [cmd('tail -n +2 data/customers.csv | cut -d, -f2,3 | sort -t, -k2')]),
    ('text', 'text-paste-seq', (), 'Print the numbers 1..12 in three columns.',
     [cmd('seq 12 | paste - - -')]),
    ('text', 'text-printf-table', ('sales',), 'Show customers.csv as an aligned table.',
     [cmd('awk -F, \'{printf "%-4s %-10s %-8s\\n", $1, $2, $3}\' data/customers.csv')]),
    ('git', 'git-status', ('gitrepo',), 'What is the state of the repo working tree?',
     [cmd('cd repo'), cmd('git status')]),
    ('git', 'git-log', ('gitrepo',), 'Show the history of the repo as one line per commit.',
     [cmd('cd repo'), cmd('git log --oneline --all --graph')]),
    ('git', 'git-commit-notes', ('gitrepo',), 'Commit NOTES.txt with a sensible message.',
     [cmd('cd repo'), cmd('git add NOTES.txt'), cmd("git commit -m 'Add notes'"),
      cmd('git log --oneline -3')]),
    ('git', 'git-branches', ('gitrepo',), 'List the branches and switch to the feature branch.',
     [cmd('cd repo'), cmd('git branch -a'), cmd('git switch feature/report'), cmd('ls')]),
    ('git', 'git-diff', ('gitrepo',), 'Change the pears stock to 9 and show the diff.',
     [cmd('cd repo'), cmd("sed -i 's/4}/9}/' stock.py"), cmd('git diff')]),
    ('git', 'git-show', ('gitrepo',), 'Show what the last commit on main changed.',
     [cmd('cd repo'), cmd('git show --stat HEAD')]),
    ('git', 'git-merge', ('gitrepo',), 'Merge the feature branch into main.',
     [cmd('cd repo'), cmd('git merge --no-edit feature/report'), cmd('git log --oneline')]),
    ('git', 'git-blame', ('gitrepo',), 'Who last changed each line of stock.py?',
     [cmd('cd repo'), cmd('git blame stock.py')]),
    ('git', 'git-restore', ('gitrepo',), 'Break stock.py, then restore it from the last commit.',
     [cmd('cd repo'), cmd('echo oops > stock.py'), cmd('git restore stock.py'), cmd('cat stock.py')]),
    ('git', 'git-init-new', ('notes',), 'Turn the notes folder into a git repository with one commit.',
     [cmd('cd notes'), cmd('git init -q'), cmd('git add .'),
      cmd("git -c user.name=me -c user.email=me@example.com commit -q -m 'Initial notes'"), cmd('git log')]),
    ('git', 'git-stash', ('gitrepo',), 'Stash a change to README.md and check the tree is clean.',
     [cmd('cd repo'), cmd("echo '- more' >> README.md"), cmd('git stash'), cmd('git status --short'),
      cmd('git stash list')]),
    ('git', 'git-tag', ('gitrepo',), 'Tag the current commit v0.1 and list tags.',
     [cmd('cd repo'), cmd('git tag v0.1'), cmd('git tag'), cmd('git describe --tags')]),
    ('python', 'py-run-app', ('webapp',), 'Run webapp/src/app.py.',
     [cmd('cd webapp/src'), cmd('python3 app.py')]),
    ('python', 'py-run-fib', ('scripts',), 'Run scripts/fib.py and report the output.',
     [cmd('python3 scripts/fib.py')]),
    ('python', 'py-args', ('scripts',), 'Run scripts/hello.py with your name as argument.',
     [cmd('python3 scripts/hello.py Ada')]),
    ('python', 'py-stdin', ('scripts', 'notes'), 'Count the words of notes/todo.txt with wordcount.py.',
     [cmd('python3 scripts/wordcount.py < notes/todo.txt')]),
    ('python', 'py-one-liner', ('sales',), 'Use a python one-liner to average the units in sales.csv.',
     [cmd('python3 -c "import csv; r=list(csv.DictReader(open(\'data/sales.csv\'))); '
          'print(sum(int(x[\'units\']) for x in r)/len(r))"')]),
    ('python', 'py-json', (), "Pretty-print a JSON document with python's json.tool.",
     [cmd('echo \'{"a": 1, "b": [1, 2]}\' | python3 -m json.tool')]),
    ('python', 'py-syntax-error', ('scripts',), 'Run scripts/broken.py, then fix its syntax error.',
     [cmd('python3 scripts/broken.py'),
      cmd("sed -i 's/def greet(name)/def greet(name):/' scripts/broken.py"),
      cmd('python3 scripts/broken.py')]),
    ('python', 'py-write-script', (), 'Write a script that prints the squares of 1..5 and run it.',
     [cmd("printf 'for i in range(1, 6):\\n    print(i * i)\\n' > squares.py"), cmd('python3 squares.py')]),
    ('python', 'py-import-module', ('webapp',), 'Import slugify from webapp/src/utils.py and try it.',
     [cmd('cd webapp/src'),
      cmd('python3 -c \'from utils import slugify; print(slugify("Big News Today"))\'')]),
    ('python', 'py-traceback', (), 'Run a python command that divides by zero and read the traceback.',
     [cmd("python3 -c 'print(1/0)'")]),
    ('python', 'py-version', (), 'Which python version is installed, and where?',
     [cmd('python3 --version'), cmd('which python3')]),
    ('python', 'py-http-module', ('webapp',), 'Use python to read config.ini and print the port.',
     [cmd('python3 -c "import configparser as c; p=c.ConfigParser(); p.read(\'webapp/config.ini\'); '
          'print(p[\'server\'][\'port\'])"')]),
    ('errors', 'err-missing-file', ('notes',),
     'Show notes/done.txt (it does not exist) then list what exists.',
     [cmd('cat notes/done.txt'), cmd('ls notes')]),
    ('errors', 'err-typo-command', ('gitrepo',), 'Check the repo status (mind typos).',
     [cmd('cd repo'), cmd('gti status'), cmd('git status')]),
    ('errors', 'err-permission', ('locked',), 'Read secure/secret.txt.',
     [cmd('cat secure/secret.txt'), cmd('ls -l secure')]),
    ('errors', 'err-write-readonly', ('locked',), 'Try to create a file inside secure/vault.',
     [cmd('touch secure/vault/new.txt'), cmd('ls -ld secure/vault')]),
    ('errors', 'err-cd-file', ('webapp',), 'cd into webapp/README.md and explain the error.',
     [cmd('cd webapp/README.md'), cmd('file webapp/README.md')]),
    ('errors', 'err-not-a-repo', ('notes',), 'Run git log inside notes (not a repository).',
     [cmd('cd notes'), cmd('git log')]),
    ('errors', 'err-rm-dir', ('projects',), 'Remove projects/beta with plain rm.',
     [cmd('rm projects/beta'), cmd('rm -r projects/beta'), cmd('ls projects')]),
    ('errors', 'err-bad-option', (), 'Run ls with an option that does not exist.',
     [cmd('ls --colour-me-happy'), cmd('echo $?')]),
    ('errors', 'err-python-import', (), 'Import a python module that is not installed.',
     [cmd("python3 -c 'import numpy'")]),
    ('errors', 'err-root-dir', (), 'List /root as an ordinary user.',
     [cmd('ls /root'), cmd('whoami')]),
    ('errors', 'err-unclosed-quote', (), 'Run an echo whose quote is never closed, then recover with Ctrl-C.',
     [keys(("echo 'unfinished", 0.3), ('Enter', 0.5)), keys(('C-c', 0.5)), cmd('echo recovered')]),
    ('errors', 'err-command-not-found', (), 'Run a program that is not installed.',
     [cmd('htop'), cmd('command -v top')]),
    ('pipes', 'pipe-ps-sort', (), 'Show the processes using the most memory.',
     [cmd('ps aux --sort=-%mem | head -5')]),
    ('pipes', 'pipe-tee', ('logs',), 'Save the 500 responses to /tmp/500.txt while also printing them.',
     [cmd("grep ' 500 ' logs/access.log | tee /tmp/500.txt | wc -l"), cmd('head -3 /tmp/500.txt')]),
    ('pipes', 'pipe-xargs', ('projects',), 'Count lines of every file under projects with xargs.',
     [cmd('find projects -type f | xargs wc -l')]),
    ('pipes', 'pipe-redirect-stderr', (), 'Send the error of ls /nonexistent to a file and show it.',
     [cmd('ls /nonexistent 2> err.txt'), cmd('cat err.txt')]),
    ('pipes', 'pipe-background-job', (), 'Start a sleep in the background, list jobs, then wait for it.',
     [cmd('sleep 2 &'), cmd('jobs'), cmd('wait'), cmd('echo finished')]),
    ('pipes', 'pipe-env', (), 'Set a variable, export it, and read it from a child shell.',
     [cmd('export GREETING=hola'), cmd("bash -c 'echo $GREETING'"), cmd('env | grep GREETING')]),
    ('pipes', 'pipe-subshell-count', ('webapp',), "Print 'N python files' using command substitution.",
     [cmd('echo "$(find webapp -name \'*.py\' | wc -l) python files"')]),
    ('pipes', 'pipe-and-or', (), 'Create dir build only if it does not exist, and report either way.',
     [cmd('test -d build && echo exists || mkdir build'),
      cmd('test -d build && echo exists || mkdir build')]),
    ('pipes', 'pipe-loop', ('logs',), 'Loop over the files in logs and print each name with its line count.',
     [cmd('for f in logs/*.log; do echo "$f $(wc -l < $f)"; done')]),
    ('pipes', 'pipe-date-math', (), "Print today's date and the date 30 days from now.",
     [cmd('date +%F'), cmd("date -d '+30 days' +%F")]),
    ('pipes', 'pipe-system-info', (), 'Report the kernel, uptime and free disk space.',
     [cmd('uname -a'), cmd('uptime'), cmd('df -h .')]),
    ('pipes', 'pipe-ctrl-c', (), 'Start a long-running command and interrupt it.',
     [keys(('sleep 100', 0.1), ('Enter', 0.5)), keys(('C-c', 0.5)), cmd('echo interrupted')]),
    ('interactive', 'int-python-repl', (), 'Use the python REPL to compute 2**100 and exit.',
     [keys(('python3', 0.1), ('Enter', 1.0)), keys(('2**100', 0.1), ('Enter', 0.5)),
      keys(('exit()', 0.1), ('Enter', 0.5))]),
    ('interactive', 'int-python-repl-csv', ('sales',), 'In a python REPL, load sales.csv and count rows.',
     [keys(('python3', 0.1), ('Enter', 1.0)), keys(('import csv', 0.1), ('Enter', 0.3)),
      keys(("len(list(csv.reader(open('data/sales.csv'))))", 0.1), ('Enter', 0.5)),
      keys(('exit()', 0.1), ('Enter', 0.5))]),
    ('interactive', 'int-vim-edit', ('notes',), 'Open notes/todo.txt in vim, add a line at the end and save.',
     [keys(('vi notes/todo.txt', 0.1), ('Enter', 1.0)),
      keys(('G', 0.1), ('o', 0.1), ('learn vim', 0.1), ('Escape', 0.3)), keys((':wq', 0.1), ('Enter', 0.5)),
      cmd('tail -2 notes/todo.txt')]),
    ('interactive', 'int-vim-quit', ('webapp',), 'Open webapp/src/app.py in vim and quit without saving.',
     [keys(('vi webapp/src/app.py', 0.1), ('Enter', 1.0)), keys(('dd', 0.3)),
      keys((':q!', 0.1), ('Enter', 0.5))]),
    ('interactive', 'int-nano-create', (), 'Create shopping.txt with nano and save it.',
     [keys(('nano shopping.txt', 0.1), ('Enter', 1.0)), keys(('eggs', 0.1), ('Enter', 0.1), ('bread', 0.3)),
      keys(('C-o', 0.3), ('Enter', 0.5)), keys(('C-x', 0.5)), cmd('cat shopping.txt')]),
    ('interactive', 'int-less-log', ('webapp',), 'Page through webapp/logs/app.log with less and quit.',
     [keys(('less webapp/logs/app.log', 0.1), ('Enter', 1.0)), keys(('Space', 0.5)), keys(('q', 0.5))]),
    ('interactive', 'int-less-search', ('logs',), 'Search for 500 in logs/access.log inside less.',
     [keys(('less logs/access.log', 0.1), ('Enter', 1.0)), keys(('/ 500 ', 0.1), ('Enter', 0.5)),
      keys(('n', 0.3)), keys(('q', 0.5))]),
    ('interactive', 'int-top', (), 'Look at running processes in top, sort by memory, then quit.',
     [keys(('top', 0.1), ('Enter', 1.5)), keys(('M', 1.0)), keys(('q', 0.5))]),
    ('interactive', 'int-bc', (), 'Use bc to compute 2^64 and 22/7 with 5 decimals.',
     [keys(('bc -q', 0.1), ('Enter', 0.5)), keys(('2^64', 0.1), ('Enter', 0.3)),
      keys(('scale=5; 22/7', 0.1), ('Enter', 0.3)), keys(('quit', 0.1), ('Enter', 0.5))]),
    ('interactive', 'int-bc-pipe', (), 'Compute the square root of 2 to 20 digits with bc in a pipe.',
     [cmd("echo 'scale=20; sqrt(2)' | bc")]),
    ('interactive', 'int-cat-stdin', (), 'Type two lines into cat > typed.txt and finish with Ctrl-D.',
     [keys(('cat > typed.txt', 0.1), ('Enter', 0.3)),
      keys(('hello', 0.1), ('Enter', 0.1), ('world', 0.1), ('Enter', 0.3)), keys(('C-d', 0.5)),
      cmd('cat typed.txt')]),
    ('interactive', 'int-python-help-exit', (), 'Start python, make a typo, recover, and quit with Ctrl-D.',
     [keys(('python3', 0.1), ('Enter', 1.0)), keys(("pritn('x')", 0.1), ('Enter', 0.5)),
      keys(("print('x')", 0.1), ('Enter', 0.5)), keys(('C-d', 0.5))]),
    ('interactive', 'int-read-prompt', (), 'Run a shell read prompt and answer it.',
     [keys(("read -p 'name? ' NAME", 0.1), ('Enter', 0.3)), keys(('Ada', 0.1), ('Enter', 0.3)),
      cmd('echo "hi $NAME"')]),
    ('interactive', 'int-less-help', ('notes',), 'Open less on ideas.md, show its help screen, quit both.',
     [keys(('less notes/ideas.md', 0.1), ('Enter', 1.0)), keys(('h', 0.5)), keys(('q', 0.5)),
      keys(('q', 0.5))]),
]

# Check commands, run in the episode's environment from the home directory after the last step. Not
# /tmp: under bwrap each shell has its own. Several checks give partial credit.
CHECKS: dict[str, list[str]] = {
    'nav-hidden': ['test -f notes/.config'],
    'files-create-notes': ['test "$(wc -l < notes.txt)" -eq 3'],
    'files-append': ["grep -qx 'water plants' notes/todo.txt", "grep -qx 'buy milk' notes/todo.txt"],
    'files-copy-backup': ['cmp webapp/config.ini webapp/config.ini.bak'],
    'files-rename': ['test -f notes/ideas-2024.md', 'test ! -e notes/ideas.md'],
    'files-mkdir-tree': ['test -d tool/src', 'test -d tool/tests', 'test -d tool/docs'],
    'files-remove-logs': ['test ! -e logs/old', 'test -f logs/access.log'],
    'files-edit-sed': ["grep -q '^port = 9090$' webapp/config.ini",
                       "! grep -q 'port = 8080' webapp/config.ini"],
    'files-touch-many': ['for i in 1 2 3 4 5; do test -f report-$i.txt || exit 1; done'],
    'files-chmod-script': ['test -x scripts/backup.sh'],
    'files-tar': ["tar tzf notes.tar.gz | grep -qx 'notes/todo.txt'"],
    'files-gzip': ['gzip -t logs/access.log.gz', 'zcat logs/access.log.gz | cmp - logs/access.log'],
    'files-symlink': ['test -L current.log',
                      'test "$(readlink -f current.log)" = "$(readlink -f logs/access.log)"'],
    'text-dedupe-todo': ['test -z "$(sort notes/todo.txt | uniq -d)"',
                         'test "$(head -1 notes/todo.txt)" = "buy milk"',
                         "grep -qx 'fix bike' notes/todo.txt"],
    'text-sed-replace': ["grep -qx 'repair bike' notes/todo.txt", "! grep -q 'fix bike' notes/todo.txt"],
    'git-commit-notes': ['git -C repo ls-files --error-unmatch NOTES.txt',
                         'test -z "$(git -C repo status --porcelain NOTES.txt)"'],
    'git-branches': ['test "$(git -C repo branch --show-current)" = feature/report'],
    'git-diff': ["grep -q \"'pears': 9\" repo/stock.py"],
    'git-merge': ['git -C repo merge-base --is-ancestor feature/report HEAD',
                  'test "$(git -C repo branch --show-current)" = main'],
    'git-restore': ['git -C repo diff --quiet -- stock.py'],
    'git-init-new': ['git -C notes rev-parse -q --verify HEAD',
                     'test -z "$(git -C notes status --porcelain)"'],
    'git-stash': ['test -z "$(git -C repo status --porcelain --untracked-files=no)"',
                  'test -n "$(git -C repo stash list)"'],
    'git-tag': ['test "$(git -C repo rev-parse v0.1^{commit})" = "$(git -C repo rev-parse HEAD)"'],
    'py-syntax-error': ['python3 scripts/broken.py'],
    'pipe-and-or': ['test -d build'],
    'int-vim-edit': ['test "$(wc -l < notes/todo.txt)" -eq 6', 'test -n "$(tail -1 notes/todo.txt)"'],
    'int-vim-quit': ["head -1 webapp/src/app.py | grep -qx 'from utils import slugify'"],
    'int-nano-create': ['grep -qx eggs shopping.txt', 'grep -qx bread shopping.txt'],
    'int-cat-stdin': ['test "$(cat typed.txt)" = "$(printf \'hello\\nworld\')"'],
}
NO_END_STATE = "the task asks to show or report something: the answer is on the screen, not in the end state"
# fmt: on


def verifier_for(task_id: str) -> dict[str, Any]:
    if task_id in CHECKS:
        return {"kind": "command", "checks": CHECKS[task_id]}
    return {"kind": "none", "reason": NO_END_STATE}


def build() -> list[dict[str, Any]]:
    rows = []
    for category, task_id, workspaces, instruction, actions in TASKS:
        rows.append(
            {
                "id": task_id,
                "category": category,
                "instruction": instruction,
                "setup": setup_for(*workspaces),
                "actions": actions,
                "metadata": {"workspaces": list(workspaces)},
                "verifier": verifier_for(task_id),
            }
        )
    return rows


def main() -> None:
    rows = build()
    ids = [row["id"] for row in rows]
    if len(ids) != len(set(ids)):
        raise SystemExit("duplicate task ids in TASKS")
    if unknown := sorted(set(CHECKS) - set(ids)):
        raise SystemExit(f"CHECKS names unknown task ids: {unknown}")
    OUT.write_text("".join(json.dumps(row, sort_keys=True) + "\n" for row in rows), encoding="utf-8")
    print(f"wrote {len(rows)} tasks to {OUT}")


if __name__ == "__main__":
    main()
