# bash completion of the cairn checkpoint tool (installed as
# <prefix>/share/bash-completion/completions/cairn).
_cairn()
{
    local cur prev verb i
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    verb=
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
            ls|cat|verify|diff|convert|repair|profile|steps) verb=${COMP_WORDS[i]}; break ;;
        esac
    done
    case $prev in
        --memory|--step|--max-lines|--abs|--rel|--hint|--checksum-block|-s|--slice)
            return ;;  # a value
        --layout)
            COMPREPLY=($(compgen -W "auto per-rank container" -- "$cur")); return ;;
    esac
    local opts
    case $verb in
        "") opts="ls cat verify diff convert repair profile steps -q --quiet --memory --version -h --help" ;;
        ls) opts="-D --decomposition -l --long --json --step -h --help" ;;
        cat) opts="-s --slice --step -h --help" ;;
        verify) opts="--strict --json --step -h --help" ;;
        diff) opts="--max-lines --abs --rel --json --step -h --help" ;;
        convert) opts="--layout -f --force --step --hint --checksum-block --cooperative -h --help" ;;
        repair) opts="-h --help" ;;
        profile) opts="--json -h --help" ;;
        steps) opts="--json -h --help" ;;
    esac
    if [[ -z $verb || $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    elif [[ $verb == profile ]]; then
        COMPREPLY=($(compgen -f -- "$cur"))  # a profile file
    elif [[ $verb == steps ]]; then
        COMPREPLY=($(compgen -d -- "$cur"))  # a manager's root directory
    else
        # Checkpoints: directories and .h5 files.
        COMPREPLY=($(compgen -d -- "$cur") $(compgen -f -X '!*.h5' -- "$cur"))
    fi
}
complete -o filenames -F _cairn cairn
