# cairn_option(NAME "description" DEFAULT): a tri-state option ON/OFF/AUTO.
# AUTO means "use it when found"; ON means "fail when not found".
function(cairn_option name description default)
  set(${name} "${default}" CACHE STRING "${description} (ON/OFF/AUTO)")
  set_property(CACHE ${name} PROPERTY STRINGS ON OFF AUTO)
  string(TOUPPER "${${name}}" value)
  if(NOT value MATCHES "^(ON|OFF|AUTO)$")
    message(FATAL_ERROR "${name} must be ON, OFF or AUTO, not '${${name}}'")
  endif()
endfunction()
