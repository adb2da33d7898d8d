"""pyautogui's key and mouse-button names, as the X keysyms and button numbers xdotool takes.

Data only, importing nothing: the host's action parser (sandboxes/desktop/actions.py) validates key
names against this same table as `sandboxes.desktop.guest.key_names`.
"""

# pyautogui key names (lower case) -> X keysyms; a single printable character maps to itself.
KEYSYMS = {
    "enter": "Return", "return": "Return", "\n": "Return", "esc": "Escape", "escape": "Escape",
    "tab": "Tab", "\t": "Tab", "backspace": "BackSpace", "delete": "Delete", "del": "Delete",
    "space": "space", " ": "space", "up": "Up", "down": "Down", "left": "Left", "right": "Right",
    "home": "Home", "end": "End", "pageup": "Prior", "pgup": "Prior", "pagedown": "Next",
    "pgdn": "Next", "insert": "Insert", "ctrl": "Control_L", "ctrlleft": "Control_L",
    "ctrlright": "Control_R", "control": "Control_L", "shift": "Shift_L", "shiftleft": "Shift_L",
    "shiftright": "Shift_R", "alt": "Alt_L", "altleft": "Alt_L", "altright": "Alt_R", "option": "Alt_L",
    "win": "Super_L", "winleft": "Super_L", "winright": "Super_R", "super": "Super_L", "command": "Super_L",
    "capslock": "Caps_Lock", "printscreen": "Print", "prtsc": "Print", "apps": "Menu", "menu": "Menu",
    "+": "plus", "-": "minus", "=": "equal", "*": "asterisk", "/": "slash", "\\": "backslash",
    ".": "period", ",": "comma", ";": "semicolon", ":": "colon", "'": "apostrophe", '"': "quotedbl",
    "[": "bracketleft", "]": "bracketright", "{": "braceleft", "}": "braceright", "(": "parenleft",
    ")": "parenright", "<": "less", ">": "greater", "?": "question", "!": "exclam", "@": "at",
    "#": "numbersign", "$": "dollar", "%": "percent", "^": "asciicircum", "&": "ampersand",
    "_": "underscore", "|": "bar", "~": "asciitilde", "`": "grave",
    **{f"f{n}": f"F{n}" for n in range(1, 25)},
}  # fmt: skip
BUTTONS = {"left": 1, "middle": 2, "right": 3}
