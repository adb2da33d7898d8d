"""App XML files for Appium's fake driver, in the shape of a UiAutomator2 hierarchy.

The fake driver loads `<app width height>` as the screen and answers finds by XPath over this XML;
it types only into `MockInputField` elements, so text fields are written with that tag and their
Android class in `class`.
"""

from __future__ import annotations

from pathlib import Path

NOTES_APP = """<app width="1080" height="1920">
  <android.widget.FrameLayout package="com.example.notes" class="android.widget.FrameLayout"
      bounds="[0,0][1080,1920]">
    <android.widget.LinearLayout class="android.widget.LinearLayout" bounds="[0,0][1080,1920]">
      <android.widget.TextView class="android.widget.TextView" text="Notes"
          resource-id="com.example.notes:id/header" bounds="[0,0][1080,160]"/>
      <MockInputField class="android.widget.EditText" resource-id="com.example.notes:id/title" text=""
          clickable="true" focused="true" bounds="[40,200][1040,320]"/>
      <MockButton class="android.widget.Button" text="Save" resource-id="com.example.notes:id/save"
          clickable="true" bounds="[40,400][540,520]"/>
      <MockButton class="android.widget.ImageButton" content-desc="Delete" clickable="true"
          long-clickable="true" enabled="false" bounds="[560,400][1040,520]"/>
      <android.widget.ScrollView class="android.widget.ScrollView" scrollable="true"
          bounds="[0,560][1080,1920]">
        <android.widget.CheckBox class="android.widget.CheckBox" text="Pinned" checkable="true"
            checked="true" clickable="true" bounds="[40,600][540,700]"/>
        <android.widget.TextView class="android.widget.TextView" text="hidden" displayed="false"
            bounds="[0,0][0,0]"/>
      </android.widget.ScrollView>
    </android.widget.LinearLayout>
  </android.widget.FrameLayout>
</app>
"""

NOTES_TREE = """Package: com.example.notes  Activity: unknown
[0] android.widget.TextView "Notes" id=com.example.notes:id/header @(0,0,1080,160)
[1] android.widget.EditText "" id=com.example.notes:id/title @(40,200,1040,320) clickable,editable,focused
[2] android.widget.Button "Save" id=com.example.notes:id/save @(40,400,540,520) clickable
[3] android.widget.ImageButton "" desc="Delete" @(560,400,1040,520) clickable,long-clickable,disabled
[4] android.widget.ScrollView "" @(0,560,1080,1920) scrollable
  [5] android.widget.CheckBox "Pinned" @(40,600,540,700) clickable,checked"""


def long_list_app(items: int) -> str:
    rows = "\n".join(
        f'    <MockButton class="android.widget.TextView" text="Item {i}" clickable="true"'
        f' bounds="[0,{i * 10}][1080,{i * 10 + 10}]"/>'
        for i in range(items)
    )
    listview = '<android.widget.ListView class="android.widget.ListView">'
    return f'<app width="1080" height="1920">\n  {listview}\n{rows}\n  </android.widget.ListView>\n</app>\n'


def write_app(directory: Path, xml: str, name: str = "app.xml") -> str:
    path = directory / name
    path.write_text(xml)
    return str(path)
