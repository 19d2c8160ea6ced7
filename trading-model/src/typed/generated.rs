// @generated from data/endpoints.json by tests/typed_params.rs; do not edit.
// Regenerate: UPDATE_TYPED=1 cargo test -p trading-model --test typed_params

endpoint_params! {
    /// `system/ping`: Ping REST API
    SystemPing {
        /// The caller's current time in milliseconds. (default `0`)
        milliseconds: i64 = "milliseconds",
    }
    /// `system/symbols`: Symbols
    SystemSymbols {
        /// Only return symbols of this exchange code.
        exchange: Option<String> = "exchange",
    }
    /// `system/list-announcements`: List Announcements
    SystemListAnnouncements {
        /// Rows per page. (default `10`)
        limit: i64 = "limit",
        /// Page to return, counting from 1. (default `1`)
        pagenumber: i64 = "pagenumber",
    }
    /// `subscriptions/change-php-sdk`: Change Subscription Package
    SubscriptionsChangePhpSdk {
        /// Package id from subscriptions/list-packages.
        id: String = "id",
    }
    /// `subscriptions/change-setting-request`: Change Setting
    SubscriptionsChangeSettingRequest {
        /// Plan limit to change.
        setting: String = "setting",
        /// Requested value of the limit.
        value: i64 = "value",
    }
    /// `subscriptions/enable-private-server`: Enable Private Server
    SubscriptionsEnablePrivateServer {
        /// Server region.
        region: String = "region",
        /// Package id from subscriptions/server-types.
        server_package: String = "server_package",
    }
    /// `subscriptions/enable-shared-server`: Enable Shared Server
    SubscriptionsEnableSharedServer {
        /// Server region.
        region: String = "region",
    }
    /// `subscriptions/server-types`: Subscriptions Server Types
    SubscriptionsServerTypes {
        /// private or shared.
        r#type: String = "type",
        /// Rental time in seconds (7200 or more); drives the price.
        duration: i64 = "duration",
    }
    /// `exchange-api-keys/add`: Add Exchange API Credentials
    ExchangeApiKeysAdd {
        /// Exchange code from strategy/list-exchanges.
        exchange: String = "exchange",
        /// Name shown when choosing credentials.
        label: String = "label",
        /// Exchange API key.
        token: String = "token",
        /// Exchange API secret.
        secret: String = "secret",
        /// Passphrase that some exchanges require in addition.
        password: Option<String> = "password",
    }
    /// `exchange-api-keys/edit`: Update Exchange API Key
    ExchangeApiKeysEdit {
        /// Id of the record to act on.
        id: String = "id",
        /// Name shown when choosing credentials.
        label: String = "label",
    }
    /// `strategy/create-tab`: Create Tab
    StrategyCreateTab {
        /// Name.
        name: String = "name",
    }
    /// `strategy/create-profile`: Create Profile Strategy
    StrategyCreateProfile {
        /// Name.
        name: String = "name",
        /// Free text.
        description: Option<String> = "description",
    }
    /// `strategy/edit-component`: Edit Strategy Component
    StrategyEditComponent {
        /// Id of the strategy (profile) to change.
        id: String = "id",
        /// The edit-profile array to change.
        component: String = "component",
        /// Index of the entry (0-based); the length appends one. (default `0`)
        row: i64 = "row",
        /// New value of the entry.
        value: String = "value",
    }
    /// `strategy/edit-profile`: Edit Profile Strategy
    StrategyEditProfile {
        /// Id of the record to act on.
        id: String = "id",
        /// Algorithm id from strategy/list-algorithms.
        algorithm_id: String = "algorithm_id",
        /// Name.
        name: String = "name",
        /// Pause between order slices.
        slice_delay: String = "slice_delay",
        /// Free text.
        description: Option<String> = "description",
        /// Parent.
        parent: Option<String> = "parent",
        /// Price convert conditions.
        price_convert_conditions: Option<String> = "price_convert_conditions",
        /// Price convert executions.
        price_convert_executions: Option<String> = "price_convert_executions",
        /// When true the conditions are skipped.
        noconditions: Option<bool> = "noconditions",
        /// Condition codes.
        condition_codes: Option<Vec<String>> = "condition_codes",
        /// Condition values.
        condition_values: Option<Vec<String>> = "condition_values",
        /// Condition orderbooklevel side1.
        condition_orderbooklevel_side1: Option<Vec<String>> = "condition_orderbooklevel_side1",
        /// Condition orderbooklevel side2.
        condition_orderbooklevel_side2: Option<Vec<String>> = "condition_orderbooklevel_side2",
        /// Executable parents.
        executable_parents: Option<Vec<String>> = "executable_parents",
        /// Executable values.
        executable_values: Option<Vec<String>> = "executable_values",
        /// Executable codes.
        executable_codes: Option<Vec<String>> = "executable_codes",
        /// Executable apikeys.
        executable_apikeys: Option<Vec<String>> = "executable_apikeys",
        /// Executable apikeysmarket.
        executable_apikeysmarket: Option<Vec<String>> = "executable_apikeysmarket",
        /// Executable leverage.
        executable_leverage: Option<Vec<String>> = "executable_leverage",
        /// Executable priceoffset.
        executable_priceoffset: Option<Vec<String>> = "executable_priceoffset",
        /// Executable priceexact.
        executable_priceexact: Option<Vec<String>> = "executable_priceexact",
        /// Post request delay.
        post_request_delay: Option<Vec<String>> = "post_request_delay",
        /// Post request random.
        post_request_random: Option<Vec<String>> = "post_request_random",
        /// Executable priceoffsetside.
        executable_priceoffsetside: Option<Vec<String>> = "executable_priceoffsetside",
        /// Order book level the offset refers to; empty means the top level.
        executable_priceoffsettype: Option<String> = "executable_priceoffsettype",
        /// Executable pricereference.
        executable_pricereference: Option<Vec<String>> = "executable_pricereference",
        /// Executable toleranceminimum.
        executable_toleranceminimum: Option<Vec<String>> = "executable_toleranceminimum",
        /// Executable tolerancemaximum.
        executable_tolerancemaximum: Option<Vec<String>> = "executable_tolerancemaximum",
        /// Executable maximumtimelive.
        executable_maximumtimelive: Option<Vec<String>> = "executable_maximumtimelive",
        /// Executable obqtycumulativecheck.
        executable_obqtycumulativecheck: Option<Vec<String>> = "executable_obqtycumulativecheck",
    }
    /// `strategy/save-template`: Save Template
    StrategySaveTemplate {
        /// Strategy to save as a template.
        copy_strategy_id: String = "copy_strategy_id",
        /// Template name; the strategy name when blank.
        label: Option<String> = "label",
    }
    /// `strategy/stop`: Strategy Stop
    StrategyStop {
        /// Id of the record to act on.
        id: String = "id",
        /// Stop at once without checking open orders at the exchanges.
        force: Option<bool> = "force",
    }
    /// `strategy/list-strategy-transactions`: List Strategy Transactions
    StrategyListStrategyTransactions {
        /// Rows per page. (default `10`)
        limit: i64 = "limit",
        /// Page to return, counting from 1. (default `1`)
        pagenumber: i64 = "pagenumber",
        /// Strategy whose transactions are listed.
        main_id: String = "main_id",
        /// When true unfilled transactions are left out.
        remove_unfilled: Option<bool> = "remove_unfilled",
    }
    /// `strategy/stop-all-strategies`: Stop All Strategies
    StrategyStopAllStrategies {
        /// Stop at once without checking open orders at the exchanges.
        force: Option<bool> = "force",
    }
    /// `strategy/edit-order`: Edit Strategy Order
    StrategyEditOrder {
        /// Strategy ids in the wanted display order; the others follow.
        ids: Vec<String> = "ids",
    }
    /// `strategy/add-watchlist-item`: Add to Watchlist
    StrategyAddWatchlistItem {
        /// Trading code to watch.
        code: String = "code",
    }
    /// `public/fetch-symbol-price`: Fetch Symbol Price
    PublicFetchSymbolPrice {
        /// Comma-separated trading codes, ten at most.
        code: Vec<String> = "code",
    }
    /// `public/bitcoin-price-tracker`: Bitcoin Price Tracker
    PublicBitcoinPriceTracker {
        /// Sampling interval in milliseconds. (default `1000`)
        interval: String = "interval",
        /// Part of a symbol to match.
        symbol_filter: Option<String> = "symbol_filter",
    }
    /// `public/fetch-symbol-trades`: Fetch Symbol Trades
    PublicFetchSymbolTrades {
        /// Trading code.
        symbol: Option<String> = "symbol",
        /// Which side of the book: both, asks or bids. (default `both`)
        side: String = "side",
    }
    /// `public/tradingview-charts`: Tradingview Charts
    PublicTradingviewCharts {
        /// Trading code to chart.
        symbol: String = "symbol",
    }
    /// `public/trending-news-data`: Trending News Data
    PublicTrendingNewsData {
        /// Day of the articles as YYYY-MM-DD.
        date: String = "date",
        /// Comma-separated keyword terms, ten at most.
        keyword_contains: Option<Vec<String>> = "keyword_contains",
        /// Comma-separated title terms, ten at most.
        title_contains: Option<Vec<String>> = "title_contains",
        /// Comma-separated brief terms, ten at most.
        brief_contains: Option<Vec<String>> = "brief_contains",
        /// Comma-separated keywords to leave out.
        exclude_keywords: Option<Vec<String>> = "exclude_keywords",
    }
    /// `public/trending-news-watchlist`: Trending News Watchlist
    PublicTrendingNewsWatchlist {
        /// Comma-separated keyword terms, ten at most.
        keyword_contains: Option<Vec<String>> = "keyword_contains",
    }
    /// `public/trending-news-source-impact`: Trending News Source Impact
    PublicTrendingNewsSourceImpact {
        /// Part of a publication name (case ignored); every publication whose name contains it is answered.
        source_contains: String = "source_contains",
    }
    /// `public/trending-news-remove-keyword`: Trending News Remove Keyword
    PublicTrendingNewsRemoveKeyword {
        /// Keyword id from trending-news-list-my-keywords.
        keywordid: String = "keywordid",
    }
    /// `public/match-pair`: Match Pair
    PublicMatchPair {
        /// Comma-separated pairs without exchange prefix, ten at most.
        code: Vec<String> = "code",
        /// Rows per page. (default `10`)
        limit: i64 = "limit",
        /// Page to return, counting from 1. (default `1`)
        pagenumber: i64 = "pagenumber",
    }
    /// `public/fetch-spread-data`: Fetch Spread Data
    PublicFetchSpreadData {
        /// Two trading codes joined by a plus sign.
        combination: String = "combination",
        /// When true only the newest candle is returned.
        latestonly: Option<bool> = "latestonly",
        /// Day as YYYY-MM-DD.
        date: Option<String> = "date",
    }
    /// `public/fetch-articles`: Fetch Articles
    PublicFetchArticles {
        /// Article to return; 0 lists articles. (default `0`)
        article_id: i64 = "article_id",
        /// Only list titles containing this text; 0 means no filter. (default `0`)
        title_contains: String = "title_contains",
        /// Rows per page. (default `10`)
        limit: i64 = "limit",
        /// Page to return, counting from 1. (default `1`)
        pagenumber: i64 = "pagenumber",
    }
    /// `public/spreads-list`: Spreads List
    PublicSpreadsList {
        /// Text the combination must contain.
        spread_includes: Option<String> = "spread_includes",
        /// Rows per page. (default `100`)
        limit: i64 = "limit",
        /// Page to return, counting from 1. (default `1`)
        pagenumber: i64 = "pagenumber",
    }
    /// `subaccounts/subaccount-create`: Create Sub Account
    SubaccountsSubaccountCreate {
        /// Name.
        name: String = "name",
        /// E-mail address.
        email: String = "email",
        /// Sign-in name; must be unique.
        username: String = "username",
        /// Password.
        password: String = "password",
        /// Whether the sub-account may sign in.
        active: bool = "active",
        /// Whether the sub-account may manage exchange credentials.
        allow_api_key_usage: bool = "allow_api_key_usage",
    }
    /// `subaccounts/subaccount-edit`: Edit Subaccount
    SubaccountsSubaccountEdit {
        /// Id of the record to act on.
        id: String = "id",
        /// E-mail address.
        email: String = "email",
        /// Name.
        name: String = "name",
        /// Whether the sub-account may sign in.
        active: bool = "active",
        /// Whether the sub-account may manage exchange credentials.
        allow_api_key_usage: bool = "allow_api_key_usage",
    }
    /// `subaccounts/broadcast-create`: Send Broadcast
    SubaccountsBroadcastCreate {
        /// Title.
        title: String = "title",
        /// Main text.
        body: String = "body",
    }
    /// `subaccounts/broadcast-edit`: Edit Broadcast
    SubaccountsBroadcastEdit {
        /// Broadcast id from broadcast-list.
        id: String = "id",
        /// New title.
        title: String = "title",
        /// New body.
        body: String = "body",
    }
    /// `user/close-account`: Close Account
    UserCloseAccount {
        /// Why the account should be closed.
        reason: String = "reason",
        /// Current account password.
        password: String = "password",
    }
    /// `user/settings`: User Account Settings
    UserSettings {
        /// Sets the account's time zone (IANA name such as Europe/Dublin).
        timezone: Option<String> = "timezone",
        /// Sets the language of notifications.
        language: Option<String> = "language",
        /// Sets the address notifications go to.
        notification_email: Option<String> = "notification_email",
        /// Sets the account's minimum spacing between signed calls in ms (0 = off; otherwise at least the plan's user_settings.ratelimit.ms).
        ratelimit_ms: Option<i64> = "ratelimit_ms",
    }
    /// `user/active-sessions`: User Active Sessions
    UserActiveSessions {
        /// Session query.
        request: String = "request",
    }
    /// `user/create-support-ticket`: Create Support Ticket
    UserCreateSupportTicket {
        /// Name.
        name: String = "name",
        /// E-mail address.
        email: String = "email",
        /// Ticket subject.
        subject: String = "subject",
        /// Ticket category.
        category: Option<String> = "category",
        /// Ticket text.
        message: String = "message",
    }
    /// `exchange-query/create-query`: Create Query
    ExchangeQueryCreateQuery {
        /// Id of stored exchange credentials.
        apikey: String = "apikey",
        /// Name of a predefined query.
        exchange_query: String = "exchange_query",
    }
    /// `exchange-query/order-create`: Create Order
    ExchangeQueryOrderCreate {
        /// Id of stored exchange credentials.
        apikey: String = "apikey",
        /// market or limit.
        ordertype: String = "ordertype",
        /// Trading code.
        code: String = "code",
        /// buy or sell.
        side: String = "side",
        /// Amount to trade.
        quantity: String = "quantity",
        /// Limit price.
        price: Option<String> = "price",
        /// When to send the first order, in milliseconds; now when absent.
        order_send_time: Option<i64> = "order_send_time",
        /// How many identical orders to send (10 at most). (default `1`)
        repeat_times: i64 = "repeat_times",
        /// Milliseconds between repeated orders. (default `10000`)
        repeat_interval: i64 = "repeat_interval",
        /// Cancel an unfilled limit order this many milliseconds after it was placed; 0 never. (default `0`)
        expire_after: i64 = "expire_after",
    }
    /// `exchange-query/list-balances`: List Balances
    ExchangeQueryListBalances {
        /// Only the balances of this exchange key.
        apikey: Option<String> = "apikey",
    }
    /// `exchange-query/list-closed-orders`: List Closed Orders
    ExchangeQueryListClosedOrders {
        /// Only orders placed through this exchange key.
        apikey: Option<String> = "apikey",
        /// Only orders of this trading code.
        code: Option<String> = "code",
    }
    /// `wallets/fetch-deposit-address`: Wallets Fetch Deposit Address
    WalletsFetchDepositAddress {
        /// Wallet currency. (default `BTC`)
        wallet: String = "wallet",
    }
    /// `wallets/withdraw`: Withdraw from wallet
    WalletsWithdraw {
        /// Wallet currency to withdraw from.
        wallet: String = "wallet",
        /// Destination address.
        address: String = "address",
        /// Amount to withdraw (before the fee).
        amount: String = "amount",
    }
    /// `finance/list-commissions-paid`: List Commissions Paid
    FinanceListCommissionsPaid {
        /// Sub-account id from subaccounts/subaccount-list.
        subaccount_id: String = "subaccount_id",
        /// Rows per page. (default `10`)
        limit: i64 = "limit",
        /// Page to return, counting from 1. (default `1`)
        pagenumber: i64 = "pagenumber",
    }
    /// `tests/black-scholes-implied-volatility-calculator`: Black Scholes Implied Volatility Calculator
    TestsBlackScholesImpliedVolatilityCalculator {
        /// Price of the underlying asset; 100 when absent.
        price: Option<String> = "price",
        /// Strike price of the option; 100 when absent.
        strike: Option<String> = "strike",
        /// Time to expiry in years; 0.5 when absent.
        time: Option<String> = "time",
        /// Risk-free interest rate per year as a fraction (0.01 is 1 %); 0.01 when absent.
        rate: Option<String> = "rate",
        /// Market price of the option whose implied volatility is wanted; 8 when absent.
        option_price: Option<String> = "option_price",
        /// Option type. (default `call`)
        r#type: String = "type",
    }
    /// `tests/server-location-speed-to-exchange`: Test Server Location Speed To Exchange
    TestsServerLocationSpeedToExchange {
        /// Server id from list-private-servers or list-shared-servers.
        server_id: String = "server_id",
        /// First exchange to measure.
        exchange1: String = "exchange1",
        /// Second exchange to measure.
        exchange2: String = "exchange2",
    }
    /// `exchangeindex/symbols`: Monitored Symbols
    ExchangeindexSymbols {
        /// Exchange code.
        exchange: String = "exchange",
        /// Rows per page. (default `10`)
        limit: i64 = "limit",
        /// Page to return, counting from 1. (default `1`)
        pagenumber: i64 = "pagenumber",
    }
    /// `export/request`: Request Export
    ExportRequest {
        /// What to export: strategy_transactions or all_strategies. (default `strategy_transactions`)
        system: String = "system",
        /// File format: .xls or .csv.
        r#type: String = "type",
        /// Trading code.
        symbol: String = "symbol",
        /// Rows to export. (default `100`)
        limit: i64 = "limit",
    }
    /// `calendar/add-reminder`: Add Reminder
    CalendarAddReminder {
        /// When to remind, in milliseconds since the epoch.
        time: String = "time",
        /// What to remind of.
        text: String = "text",
        /// Repeat the reminder: none, daily or weekly. (default `none`)
        repeat: String = "repeat",
    }
    /// `algorithm-creator/algorithm-add`: Algorithm Add
    AlgorithmCreatorAlgorithmAdd {
        /// Name.
        name: String = "name",
        /// Group the algorithm belongs to.
        group_name: String = "group_name",
        /// Reverse id.
        reverse_id: Option<String> = "reverse_id",
        /// Maximum transactions successful.
        maximum_transactions_successful: Option<String> = "maximum_transactions_successful",
        /// Maximum transactions canceled.
        maximum_transactions_canceled: Option<String> = "maximum_transactions_canceled",
        /// Comments.
        comments: Option<String> = "comments",
        /// Status.
        status: Option<String> = "status",
        /// Package minimum.
        package_minimum: Option<String> = "package_minimum",
        /// Monthly fee.
        monthly_fee: Option<String> = "monthly_fee",
    }
    /// `algorithm-creator/algorithm-remove`: Algorithm Remove
    AlgorithmCreatorAlgorithmRemove {
        /// Algorithm to remove.
        id: i64 = "id",
    }
    /// `algorithm-creator/algorithm-update`: Algorithm Update
    AlgorithmCreatorAlgorithmUpdate {
        /// Id of the record to act on.
        id: String = "id",
        /// Name.
        name: String = "name",
        /// Group the algorithm belongs to.
        group_name: String = "group_name",
        /// Reverse id.
        reverse_id: Option<String> = "reverse_id",
        /// Status.
        status: Option<String> = "status",
        /// Comments.
        comments: Option<String> = "comments",
        /// Maximum transactions successful.
        maximum_transactions_successful: Option<String> = "maximum_transactions_successful",
        /// Maximum transactions canceled.
        maximum_transactions_canceled: Option<String> = "maximum_transactions_canceled",
        /// Cpa successful.
        cpa_successful: Option<String> = "cpa_successful",
        /// Cpa canceled.
        cpa_canceled: Option<String> = "cpa_canceled",
        /// Package minimum.
        package_minimum: Option<String> = "package_minimum",
        /// Monthly fee.
        monthly_fee: Option<String> = "monthly_fee",
    }
    /// `algorithm-creator/condition-add`: Condition Add
    AlgorithmCreatorConditionAdd {
        /// Algorithm the condition belongs to.
        algorithm_id: i64 = "algorithm_id",
        /// Trading code the condition watches.
        code: String = "code",
        /// Operator, one of list-condition-operators.
        operator: String = "operator",
        /// Price the operator compares with.
        value: String = "value",
    }
    /// `algorithm-creator/condition-update`: Condition Update
    AlgorithmCreatorConditionUpdate {
        /// Condition to change.
        id: i64 = "id",
        /// Trading code the condition watches.
        code: Option<String> = "code",
        /// Operator, one of list-condition-operators.
        operator: Option<String> = "operator",
        /// Price the operator compares with.
        value: Option<String> = "value",
    }
    /// `algorithm-creator/execution-add`: Execution Add
    AlgorithmCreatorExecutionAdd {
        /// Algorithm the execution belongs to.
        algorithm_id: i64 = "algorithm_id",
        /// Order type, one of list-order-types.
        order_type: String = "order_type",
        /// buy or sell.
        side: String = "side",
        /// Amount of the base asset.
        quantity: String = "quantity",
        /// Trading code the order is placed on.
        code: String = "code",
        /// Limit or stop price (order types that need one).
        price: Option<String> = "price",
    }
    /// `algorithm-creator/execution-update`: Execution Update
    AlgorithmCreatorExecutionUpdate {
        /// Execution to change.
        id: i64 = "id",
        /// Order type, one of list-order-types.
        order_type: Option<String> = "order_type",
        /// buy or sell.
        side: Option<String> = "side",
        /// Amount of the base asset.
        quantity: Option<String> = "quantity",
        /// Trading code the order is placed on.
        code: Option<String> = "code",
        /// Limit or stop price (order types that need one).
        price: Option<String> = "price",
    }
    /// `algorithm-creator/list-conditions`: List Conditions
    AlgorithmCreatorListConditions {
        /// Only the conditions of this algorithm.
        algorithm_id: Option<i64> = "algorithm_id",
    }
    /// `support/add-ticket`: Add Ticket
    SupportAddTicket {
        /// Ticket subject.
        subject: String = "subject",
        /// Ticket text.
        message: String = "message",
        /// Ticket category.
        category: Option<String> = "category",
    }
    /// `support/settings`: Settings
    SupportSettings {
        /// E-mail when support replies.
        email_on_reply: Option<bool> = "email_on_reply",
        /// E-mail when a ticket is closed.
        email_on_close: Option<bool> = "email_on_close",
    }
    /// `support/update-ticket`: Update Ticket
    SupportUpdateTicket {
        /// Ticket to answer or change.
        id: i64 = "id",
        /// Reply added to the ticket.
        message: Option<String> = "message",
        /// open or closed.
        status: Option<String> = "status",
    }
    /// `strategy/books`: Manage Books
    StrategyBooks {
        /// One trading code; default: every code the caller's strategies use.
        code: Option<String> = "code",
    }
    /// `marketplace/signals-trigger`: Signal Trigger
    MarketplaceSignalsTrigger {
        /// Signal to fire (one of yours).
        id: i64 = "id",
        /// Side of the signal.
        signal: String = "signal",
        /// open starts an iteration, close ends the open one.
        action: String = "action",
    }
    /// `marketplace/signals-edit`: Edit Signal
    MarketplaceSignalsEdit {
        /// Id of the record to act on.
        id: String = "id",
        /// Name.
        name: Option<String> = "name",
        /// Custom 1.
        custom_1: Option<String> = "custom_1",
        /// Custom 2.
        custom_2: Option<String> = "custom_2",
        /// Custom 3.
        custom_3: Option<String> = "custom_3",
        /// Custom 4.
        custom_4: Option<String> = "custom_4",
    }
    /// `marketplace/signals-position`: Signals Position
    MarketplaceSignalsPosition {
        /// Only this signal of yours.
        id: Option<i64> = "id",
    }
    /// `marketplace/subscription-manage`: Manage Subscription
    MarketplaceSubscriptionManage {
        /// Signal to subscribe to or unsubscribe from.
        id: i64 = "id",
        /// subscribe or unsubscribe.
        action: String = "action",
    }
    /// `marketplace/signals-feed`: Signals Feed
    MarketplaceSignalsFeed {
        /// Only this signal.
        id: Option<String> = "id",
        /// Only signals of this trading code.
        code: Option<String> = "code",
        /// When true more than one iteration_children row is returned.
        more: Option<bool> = "more",
        /// Rows of iteration_children per page. (default `100`)
        limit: i64 = "limit",
        /// Least number of iterations a signal must have.
        min_iterations: Option<i64> = "min_iterations",
        /// First iteration to show.
        from_iteration: Option<i64> = "from_iteration",
        /// Page of iteration_children. (default `1`)
        pagenumber: i64 = "pagenumber",
    }
    /// `marketplace/signals-add`: Add Signal
    MarketplaceSignalsAdd {
        /// Developer key.
        key: String = "key",
        /// Encrypted signal payload.
        payload: String = "payload",
    }
    /// `marketplace/signals-iteration-price-movement`: Signals Iteration Price Movement
    MarketplaceSignalsIterationPriceMovement {
        /// Id of the record to act on.
        id: String = "id",
        /// Iteration id of the signal.
        iteration: String = "iteration",
    }
    /// `subscriptions/add-drivetime`: Add Drivetime
    SubscriptionsAddDrivetime {
        /// Strategy run time to buy, in hours.
        hours: i64 = "hours",
    }
    /// `backtesting/orderbook-data`: Orderbook Data
    BacktestingOrderbookData {
        /// Exchange code.
        exchange: String = "exchange",
        /// Market as BASE/QUOTE.
        symbol: String = "symbol",
        /// Market type, spot by default. (default `spot`)
        r#type: String = "type",
        /// Timefrom.
        timefrom: i64 = "timefrom",
        /// Timeto.
        timeto: i64 = "timeto",
    }
    /// `backtesting/technical-indicators`: Technical Indicators
    BacktestingTechnicalIndicators {
        /// Exchange code.
        exchange: String = "exchange",
        /// Market as BASE/QUOTE.
        symbol: String = "symbol",
        /// Market type, spot by default. (default `spot`)
        r#type: String = "type",
        /// Candle interval.
        interval: String = "interval",
        /// Timefrom.
        timefrom: i64 = "timefrom",
        /// Timeto.
        timeto: i64 = "timeto",
    }
    /// `articles/create`: Create Article
    ArticlesCreate {
        /// Title.
        title: String = "title",
        /// Short summary.
        brief: String = "brief",
        /// Main text.
        body: String = "body",
        /// Publication time in Unix seconds.
        publishdate: i64 = "publishdate",
        /// Image1.
        image1: Option<String> = "image1",
        /// Image2.
        image2: Option<String> = "image2",
        /// Image3.
        image3: Option<String> = "image3",
        /// Image4.
        image4: Option<String> = "image4",
        /// Image5.
        image5: Option<String> = "image5",
        /// Image6.
        image6: Option<String> = "image6",
    }
    /// `articles/edit`: Edit your article
    ArticlesEdit {
        /// Id of the record to act on.
        id: String = "id",
        /// Title.
        title: String = "title",
        /// Short summary.
        brief: String = "brief",
        /// Main text.
        body: String = "body",
    }
}

endpoint_aliases! {
    /// `subscriptions/disable-private-server`: Disable Private Server
    SubscriptionsDisablePrivateServer = SubscriptionsChangePhpSdk;
    /// `subscriptions/disable-shared-server`: Subscriptions Disable Shared Server
    SubscriptionsDisableSharedServer = SubscriptionsChangePhpSdk;
    /// `subscriptions/list-private-servers`: List Private Servers
    SubscriptionsListPrivateServers = SystemListAnnouncements;
    /// `subscriptions/list-shared-servers`: List Shared Servers
    SubscriptionsListSharedServers = SystemListAnnouncements;
    /// `subscriptions/change-setting-confirm`: Change Setting Confirm
    SubscriptionsChangeSettingConfirm = SubscriptionsChangePhpSdk;
    /// `subscriptions/change-package`: Subscriptions Change Package
    SubscriptionsChangePackage = SubscriptionsChangePhpSdk;
    /// `exchange-api-keys/test`: Test API Key Status
    ExchangeApiKeysTest = SubscriptionsChangePhpSdk;
    /// `exchange-api-keys/delete`: Delete Exchange API Key
    ExchangeApiKeysDelete = SubscriptionsChangePhpSdk;
    /// `exchange-api-keys/list`: List Exchange API Keys
    ExchangeApiKeysList = SystemListAnnouncements;
    /// `strategy/delete-profile`: Delete Profile Strategy
    StrategyDeleteProfile = SubscriptionsChangePhpSdk;
    /// `strategy/hard-reset`: Strategy Hard Reset
    StrategyHardReset = SubscriptionsChangePhpSdk;
    /// `strategy/data/list`: User Strategy List
    StrategyDataList = SystemListAnnouncements;
    /// `strategy/start`: Strategy Start
    StrategyStart = SubscriptionsChangePhpSdk;
    /// `strategy/soft-stop`: Strategy Soft Stop
    StrategySoftStop = SubscriptionsChangePhpSdk;
    /// `strategy/duplicate-strategy`: Duplicate Strategy
    StrategyDuplicateStrategy = SubscriptionsChangePhpSdk;
    /// `strategy/delete-watchlist-item`: Delete Watchlist Item
    StrategyDeleteWatchlistItem = SubscriptionsChangePhpSdk;
    /// `public/realtime-bitcoin-profit`: Realtime Bitcoin Profit
    PublicRealtimeBitcoinProfit = SystemListAnnouncements;
    /// `public/trending-news-add-keyword`: Trending News Add Keyword
    PublicTrendingNewsAddKeyword = StrategyCreateTab;
    /// `public/trending-news-list-my-keywords`: List your own keywords
    PublicTrendingNewsListMyKeywords = SystemListAnnouncements;
    /// `subaccounts/subaccount-delete`: Delete Subaccount
    SubaccountsSubaccountDelete = SubscriptionsChangePhpSdk;
    /// `subaccounts/broadcast-delete`: Delete Broadcast
    SubaccountsBroadcastDelete = SubscriptionsChangePhpSdk;
    /// `subaccounts/broadcast-list`: List Broadcast
    SubaccountsBroadcastList = SystemListAnnouncements;
    /// `user/access-history`: User Access History
    UserAccessHistory = SystemListAnnouncements;
    /// `user/list-referrals`: User List Referrals
    UserListReferrals = SystemListAnnouncements;
    /// `exchange-query/delete-exchange-query`: Delete Exchange Query
    ExchangeQueryDeleteExchangeQuery = SubscriptionsChangePhpSdk;
    /// `exchange-query/list-open-orders`: Exchange Query List Open Orders
    ExchangeQueryListOpenOrders = ExchangeQueryListClosedOrders;
    /// `exchange-query/order-cancel`: Exchange Query Order Cancel
    ExchangeQueryOrderCancel = SubscriptionsChangePhpSdk;
    /// `exchange-query/order-check`: Exchange Query Order Check
    ExchangeQueryOrderCheck = SubscriptionsChangePhpSdk;
    /// `wallets/list-balances`: Wallets List Balances
    WalletsListBalances = SystemListAnnouncements;
    /// `finance/list-recent-transactions`: List Recent Transactions
    FinanceListRecentTransactions = SystemListAnnouncements;
    /// `finance/list-top-strategy-pnl`: List Top Strategy PNL
    FinanceListTopStrategyPnl = SystemListAnnouncements;
    /// `finance/list-depoists`: List Deposits
    FinanceListDepoists = SystemListAnnouncements;
    /// `exchangeindex/relevant-news`: Relevant News
    ExchangeindexRelevantNews = PublicTradingviewCharts;
    /// `export/fetch`: Export Fetch
    ExportFetch = SubscriptionsChangePhpSdk;
    /// `export/list`: Export List
    ExportList = SystemListAnnouncements;
    /// `algorithm-creator/algorithm-statistics`: Algorithm Statistics
    AlgorithmCreatorAlgorithmStatistics = AlgorithmCreatorAlgorithmRemove;
    /// `algorithm-creator/condition-remove`: Condition Remove
    AlgorithmCreatorConditionRemove = AlgorithmCreatorAlgorithmRemove;
    /// `algorithm-creator/execution-remove`: Execution Remove
    AlgorithmCreatorExecutionRemove = AlgorithmCreatorAlgorithmRemove;
    /// `algorithm-creator/list-executions`: List Executions
    AlgorithmCreatorListExecutions = AlgorithmCreatorListConditions;
    /// `algorithm-creator/publish-algorithm`: Publish Algorithm
    AlgorithmCreatorPublishAlgorithm = AlgorithmCreatorAlgorithmRemove;
    /// `algorithm-creator/unpublish-algorithm`: Unpublish Algorithm
    AlgorithmCreatorUnpublishAlgorithm = AlgorithmCreatorAlgorithmRemove;
    /// `algorithm-creator/validate-algorithm`: Validate Algorithm
    AlgorithmCreatorValidateAlgorithm = AlgorithmCreatorAlgorithmRemove;
    /// `competitions/join`: Join Competition
    CompetitionsJoin = AlgorithmCreatorAlgorithmRemove;
    /// `competitions/leave`: Leave Competition
    CompetitionsLeave = AlgorithmCreatorAlgorithmRemove;
    /// `marketplace/backtested-subscriptions`: Backtested Subscriptions
    MarketplaceBacktestedSubscriptions = MarketplaceSignalsPosition;
    /// `marketplace/signal-developer`: Signal Developer Profile
    MarketplaceSignalDeveloper = SubscriptionsChangePhpSdk;
    /// `marketplace/signal-reset`: Reset Signal Statistics
    MarketplaceSignalReset = SubscriptionsChangePhpSdk;
    /// `marketplace/subscription-information`: Subscription Information
    MarketplaceSubscriptionInformation = MarketplaceSignalsPosition;
    /// `marketplace/signal-delete`: Delete Signal
    MarketplaceSignalDelete = SubscriptionsChangePhpSdk;
    /// `articles/list`: List all of your articles
    ArticlesList = SystemListAnnouncements;
    /// `articles/delete`: Delete your article
    ArticlesDelete = SubscriptionsChangePhpSdk;
}
