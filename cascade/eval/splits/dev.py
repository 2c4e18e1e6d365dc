"""The dev split: tune on it. Office-building media, DejaVu fonts, WenQuanYi Micro Hei."""

from __future__ import annotations

from .spec import Fact, Fonts, IdField, Section, SplitSpec, Table, ZhReceipt

DEV = SplitSpec(
    seed=1013,
    fonts=Fonts(
        sign=("DejaVuSans-Bold.ttf", "DejaVuSerif-Bold.ttf"),
        caption=("DejaVuSans.ttf",),
        body=("DejaVuSans.ttf", "DejaVuSerif.ttf"),
        bold=("DejaVuSans-Bold.ttf", "DejaVuSerif-Bold.ttf"),
        code=("DejaVuSansMono.ttf",),
        cjk="wqy-microhei.ttc",
    ),
    footage=(
        ("pan:astronaut,coffee", 1280, 720),
        ("clip:b.mp4", 1280, 720),
        ("pan:rocket,stereo_motorcycle", 1920, 1080),
        ("pan:chelsea,coffee", 1920, 1080),
    ),
    long_footage=(
        ("pan:astronaut,coffee,rocket,chelsea,stereo_motorcycle,retina", 640, 360),
        ("pan:hubble_deep_field,immunohistochemistry,coffee,astronaut", 960, 540),
        ("clip:b.mp4", 640, 360),
    ),
    long_fps=2.0,
    photos=(
        "astronaut",
        "coffee",
        "rocket",
        "chelsea",
        "stereo_motorcycle",
        "immunohistochemistry",
        "hubble_deep_field",
        "retina",
    ),
    backgrounds=("brick", "grass", "gravel", "coffee", "astronaut"),
    counts=(
        ("still:astronaut", "How many people are in the video?", "1", "person"),
        ("image:astronaut", "How many people are in the picture?", "1", "person"),
        ("image:chelsea", "How many cats are there?", "1", "cat"),
    ),
    scenes=(
        ("pan:chelsea", "What animal appears in the video?", "cat"),
        ("pan:rocket", "What kind of vehicle is shown?", "rocket"),
        ("images", "Which picture shows the most colourful scene?", ""),
        ("pan:coffee", "What drink is in the video?", "coffee"),
        ("images", "Which photo was taken in space?", "astronaut"),
    ),
    sign_words=("DOCK", "GATE", "BAY", "LEVEL", "ZONE", "ROOM"),
    zh_sign_words=("出口", "停车场", "站台", "售票处", "候车室", "洗手间"),
    distractor_words=("CITYCAM", "NEWS 24", "LIVE", "REC"),
    banners=("GRAND OPENING", "WELCOME", "SALE TODAY"),
    doc_titles=(
        "Staff Handbook",
        "Building Guide for Tenants",
        "Office Policies",
        "Welcome Pack",
        "Facilities Manual",
    ),
    sections=(
        Section(
            "Emergency Exits",
            "fire alarms",
            "When the fire alarms sound, leave by the nearest stairway. Do not use the lifts "
            "and do not stop to collect personal belongings.",
        ),
        Section(
            "Visitor Badges",
            "guest registration",
            "Guest registration happens at the front desk. Badges must be worn at all times "
            "and returned when leaving the building.",
        ),
        Section(
            "Parking Rules",
            "bicycle racks",
            "Cars park on levels two and three. The bicycle racks are beside the loading bay "
            "and are emptied of abandoned bicycles twice a year.",
        ),
        Section(
            "Kitchen Etiquette",
            "the coffee machine",
            "Clean the coffee machine after use. Label any food you keep in the shared fridge "
            "with your name and the date.",
        ),
        Section(
            "Meeting Rooms",
            "room bookings",
            "Room bookings are made in the shared calendar up to two weeks ahead. Cancel a "
            "booking you no longer need.",
        ),
        Section(
            "Lost Property",
            "missing items",
            "Missing items are kept at reception for thirty days, then given to charity.",
        ),
        Section(
            "Waste Sorting",
            "recycling bins",
            "Paper goes in the blue recycling bins and glass in the green ones. Food waste "
            "goes in the kitchen caddy.",
        ),
        Section(
            "Network Access",
            "the guest wireless",
            "The password of the guest wireless changes every week. Staff devices use the "
            "internal network only.",
        ),
        Section(
            "Cleaning Schedule",
            "floor polishing",
            "Floor polishing takes place on the first weekend of each month. Desks are "
            "wiped every evening.",
        ),
        Section(
            "Printing Services",
            "toner cartridges",
            "Ask the help desk for new toner cartridges. Large print jobs go to the copy room "
            "printer.",
        ),
        Section(
            "Deliveries",
            "parcel lockers",
            "Parcel lockers on the ground floor hold deliveries for five days. Oversized "
            "parcels wait in the post room.",
        ),
        Section(
            "Quiet Areas",
            "phone calls",
            "Phone calls are not allowed in the library corner. Use the booths on each floor "
            "instead.",
        ),
    ),
    numbering=("{n}.", "{n}"),
    tables=(
        Table(
            "timetable",
            "Weekday Train Departures",
            "Service",
            ("Train 101", "Train 103", "Train 105", "Train 107", "Train 109"),
            ("Oakfield", "Riverside", "Mill Lane", "Central"),
        ),
        Table(
            "price",
            "Coffee Bar Prices",
            "Drink",
            ("Latte", "Mocha", "Flat White", "Chai Tea", "Hot Chocolate"),
            ("Small", "Medium", "Large"),
            unit="$",
        ),
        Table(
            "spec",
            "Laptop Comparison",
            "Model",
            ("Aero 13", "Aero 15", "Nova 14", "Nova 16"),
            ("Weight", "Battery", "Storage", "Screen"),
            units=("kg:1.0:2.6:1", "h:6:18:0", "GB:128:1024:0", "in:12:17:1"),
        ),
    ),
    table_styles=("grid", "lines"),
    code_langs=("python", "c"),
    code_verbs=("load", "parse", "build", "compute", "render", "count", "split", "resize"),
    code_nouns=(
        "settings",
        "report",
        "thumbnail",
        "matrix",
        "header",
        "profile",
        "payload",
        "grid",
    ),
    class_nouns=(
        "ConfigLoader",
        "ImageCache",
        "TaskQueue",
        "ReportBuilder",
        "PixelBuffer",
        "EventLog",
    ),
    code_themes=("light", "dark"),
    line_numbers=True,
    notice_titles=(
        "Notice to All Tenants",
        "Building Update",
        "Facilities Announcement",
        "This Week in the Office",
    ),
    facts=(
        Fact(
            "The east entrance will be closed on {v} for floor repairs.",
            "On which day will the east entrance be closed?",
            "day",
        ),
        Fact(
            "The west entrance stays open until {v} every evening.",
            "Until what time does the west entrance stay open?",
            "time",
        ),
        Fact(
            "Fire drill training takes place in {v} next week.",
            "Where does the fire drill training take place?",
            "room",
        ),
        Fact(
            "Questions about parking should go to {v} at the front desk.",
            "Who should questions about parking go to?",
            "name",
        ),
        Fact(
            "The lifts will be inspected on {v} morning.",
            "On which day will the lifts be inspected?",
            "day",
        ),
        Fact(
            "The new coffee machine arrives on {v}.",
            "When does the new coffee machine arrive?",
            "date",
        ),
        Fact(
            "The roof terrace opens at {v} on weekdays.",
            "At what time does the roof terrace open on weekdays?",
            "time",
        ),
        Fact("Spare keys are now kept in {v}.", "Where are the spare keys kept?", "room"),
        Fact("The cleaning team is led by {v}.", "Who leads the cleaning team?", "name"),
        Fact(
            "The car park will be repainted on {v}.",
            "On what date will the car park be repainted?",
            "date",
        ),
    ),
    fillers=(
        "Thank you for your patience while the work is done.",
        "Please plan your journey with this in mind.",
        "Signs will show the way on the day.",
        "We apologise for any inconvenience this may cause.",
        "Contact the facilities team with any concerns.",
    ),
    fact_values={
        "day": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"),
        "time": ("7:30 am", "8:15 am", "9:45 am", "6:30 pm", "7:00 pm", "10:15 pm"),
        "room": ("Room 214", "Room 108", "Room 330", "Room 412", "Room 506"),
        "name": ("Ms. Alvarez", "Mr. Okafor", "Ms. Jensen", "Mr. Tanaka", "Ms. Petrova"),
        "date": ("12 March", "3 April", "21 May", "9 June", "17 July"),
    },
    companies=("Northwind Traders", "Blue Harbor Supplies", "Pinecrest Office Co."),
    id_fields=(
        IdField("Invoice No", "INV-#####", "What is the invoice number?"),
        IdField("Order No", "##-####-#", "What is the order number?"),
        IdField("Customer ID", "C-#####", "What is the customer ID?"),
    ),
    receipt_layouts=("receipt", "form"),
    zh_receipt=ZhReceipt(
        shops=("华联超市", "便民小店", "好邻居便利店"),
        goods=("苹果", "牛奶", "面包", "鸡蛋", "酸奶", "香蕉", "饼干", "茶叶"),
        number_label="单号",
        date_label="日期",
        subtotal_label="小计",
        discount_label="优惠",
        total_label="合计",
        paid_label="",
        date_style="iso",
        currency="",
    ),
    questions={
        "video_sign": (
            "What is written on the small sign?",
            "What does the sign say?",
            "Read the text on the sign.",
            "What text is shown on the small sign?",
        ),
        "image_sign": (
            "What does the small sign in these pictures say?",
            "What is written on the sign in one of the photos?",
            "Read the small sign in the images.",
        ),
        "receipt_total": ("What is the total amount?",),
        "receipt_date": ("What is the date on the {noun}?",),
        "receipt_number": ("What is the {noun} number?",),
        "title": ("What is the title of this document?",),
        "heading_number": ("What is the heading of section {n}?",),
        "heading_topic": ("What is the heading of the section about {topic}?",),
        "cell_timetable": ("When does {row} leave {col}?",),
        "cell_stop_timetable": ("When does the {col} service reach {row}?",),
        "cell_price": ("How much does a {col} {row} cost?",),
        "cell_spec": ("What is the {col} of the {row}?",),
        "code_function": ("What is the name of the function that this code defines?",),
        "code_class": ("What is the name of the class defined in this code?",),
        "zh_sign_zh": ("小牌子上写的是什么？", "牌子上写着什么字？"),
        "zh_sign_en": ("What does the small sign say?", "What is written on the sign?"),
        "zh_receipt_total": ("合计金额是多少？",),
        "zh_receipt_date": ("这张小票的日期是哪天？",),
        "zh_receipt_number": ("小票的单号是多少？",),
        "zh_receipt_total_en": ("What is the total on this receipt?",),
        "zh_video": ("视频里的小牌子上写着什么？",),
        "zh_images": ("这些照片里的小牌子上写了什么？",),
        "zh_doc_total": ("这张收据的总金额是多少？",),
        "zh_doc_title": ("这份文件的标题是什么？",),
        "zh_doc_number": ("发票号码是多少？",),
        "colour": ("What does the {colour} sign say?", "Read the {colour} sign."),
        "colour_zh": ("{colour}的牌子上写着什么？",),
        "after": (
            "What does the small sign that appears after the big banner say?",
            "What does the sign shown after the '{banner}' banner say?",
        ),
        "before": ("What did the small sign shown before the big banner say?",),
        "first": ("What is the first small sign in the video?",),
        "last": ("What is the last small sign shown?",),
        "after_zh": ("大横幅之后出现的小牌子上写着什么？",),
        "before_zh": ("大横幅出现之前的小牌子上写着什么？",),
        "photo_title": ("What is the heading of the printed page?",),
        "photo_total": ("What is the total on the receipt in the photo?",),
        "photo_number": ("What is the invoice number on the paper?",),
        "long_video": (
            "What is written on the small sign that appears in this video?",
            "What does the brief sign say?",
        ),
    },
)
