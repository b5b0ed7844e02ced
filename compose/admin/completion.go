package admin

import (
	"fmt"
	"io"
)

// ctlUsage is `shoal ctl help`.
func ctlUsage(w io.Writer) {
	fmt.Fprint(w, `usage: shoal ctl COMMAND [flags]

commands:
  clients [list]            connections of the gateways
  clients show CLIENT       one connection
  sessions [list]           sessions: connected or offline, inbox, inflight
  sessions show CLIENT      one session with its subscriptions
  subscriptions [list]      the router's subscriptions (--filter F: of filter F)
  subscriptions show CLIENT one client's subscriptions
  retained [list]           retained messages (--filter F: whose topic F matches)
  retained show TOPIC       one retained message
  bridges [list]            the Kafka bridge's mappings and their lag
  kick CLIENT               close a client's connection (0x98 administrative action)
  delete session CLIENT     end a session (kick if connected; inbox discarded)
  delete retained TOPIC     delete a retained message
  completion bash|zsh       print a shell completion script

flags (before or after the command):
  --server URL        admin API (admin.listen) of a role; repeatable or
                      comma-separated for a distributed deployment
                      (default http://127.0.0.1:9091)
  --token-file FILE   the admin token (admin.token_file)
  --data-dir DIR      shoal all's data directory, whose admin.token is read
                      without --token-file (default ./shoal-data)
  --tenant T          the tenant (--tenant '' is the default tenant)
  --all-tenants       every tenant (listings only)
  --format table|json output (default table)
  --filter F          see subscriptions and retained
  --timeout D         time limit of the command (default 10s)

A failure prints one line on stderr and exits 1; a wrong command line exits 2.
`)
}

// The completion scripts: subcommands, their actions, the flags and the
// values of --format.
const bashCompletion = `# bash completion for shoal ctl; load with: source <(shoal ctl completion bash)
_shoal_ctl() {
    local cur prev words cword
    cur="${COMP_WORDS[COMP_CWORD]}"
    prev="${COMP_WORDS[COMP_CWORD-1]}"
    local flags="--server --token-file --data-dir --tenant --all-tenants --format --filter --timeout"
    case "$prev" in
        --format) COMPREPLY=($(compgen -W "table json" -- "$cur")); return ;;
        --token-file|--data-dir) COMPREPLY=($(compgen -f -- "$cur")); return ;;
        --server|--tenant|--filter|--timeout) return ;;
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$flags" -- "$cur")); return
    fi
    local i cmd="" sub=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${COMP_WORDS[i]}" in
            -*) ;;
            ctl) [[ -z "$cmd" && "${COMP_WORDS[0]}" == *shoal ]] && continue ;;
            *) if [[ -z "$cmd" ]]; then cmd="${COMP_WORDS[i]}"; elif [[ -z "$sub" ]]; then sub="${COMP_WORDS[i]}"; fi ;;
        esac
    done
    if [[ "${COMP_WORDS[0]}" == *shoal && "${COMP_WORDS[1]}" != ctl && COMP_CWORD -eq 1 ]]; then
        COMPREPLY=($(compgen -W "ctl all gateway router session passwd version help" -- "$cur")); return
    fi
    case "$cmd" in
        "") COMPREPLY=($(compgen -W "clients sessions subscriptions retained bridges kick delete completion help" -- "$cur")) ;;
        clients|sessions|subscriptions|retained) [[ -z "$sub" ]] && COMPREPLY=($(compgen -W "list show" -- "$cur")) ;;
        delete) [[ -z "$sub" ]] && COMPREPLY=($(compgen -W "session retained" -- "$cur")) ;;
        completion) [[ -z "$sub" ]] && COMPREPLY=($(compgen -W "bash zsh" -- "$cur")) ;;
    esac
}
complete -F _shoal_ctl shoal
`

const zshCompletion = `#compdef shoal
# zsh completion for shoal ctl; load with: source <(shoal ctl completion zsh)
_shoal_ctl() {
    local -a flags
    flags=(
        '*--server[admin API URL, repeatable or comma-separated]:url:'
        '--token-file[file holding the admin token]:file:_files'
        '--data-dir[data directory of shoal all]:directory:_files -/'
        '--tenant[the tenant]:tenant:'
        '--all-tenants[every tenant, listings only]'
        '--format[output]:format:(table json)'
        '--filter[topic filter]:filter:'
        '--timeout[time limit]:duration:'
    )
    local -a words_left
    words_left=(${words:#-*})
    local cmd=${words_left[3]} sub=${words_left[4]}
    if (( CURRENT == 2 )); then
        _values 'shoal command' ctl all gateway router session passwd version help
        return
    fi
    if [[ $words[CURRENT] == -* ]]; then
        _arguments $flags
        return
    fi
    case $cmd in
        clients|sessions|subscriptions|retained) [[ -z $sub || $sub == $words[CURRENT] ]] && _values 'action' list show ;;
        delete) [[ -z $sub || $sub == $words[CURRENT] ]] && _values 'what' session retained ;;
        completion) [[ -z $sub || $sub == $words[CURRENT] ]] && _values 'shell' bash zsh ;;
        *) _values 'ctl command' clients sessions subscriptions retained bridges kick delete completion help ;;
    esac
}
compdef _shoal_ctl shoal
`

// completion prints the completion script of a shell.
func completion(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "shoal ctl: completion takes one shell: bash or zsh")
		return ExitUsage
	}
	switch args[0] {
	case "bash":
		fmt.Fprint(stdout, bashCompletion)
	case "zsh":
		fmt.Fprint(stdout, zshCompletion)
	default:
		fmt.Fprintf(stderr, "shoal ctl: completion: %q is not bash or zsh\n", args[0])
		return ExitUsage
	}
	return ExitOK
}
